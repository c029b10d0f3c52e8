package decrypt

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// jsonFile is a JSON file: an object, read with its keys' order kept.
type jsonFile struct {
	root *jsonObject
}

type jsonObject struct {
	keys   []string
	values []any
}

type jsonArray struct {
	items []any
}

// readJSON reads a JSON file and takes out its sops entry, nil when it
// has none.
func readJSON(data []byte) (document, map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, nil, err
	}
	if tok != json.Delim('{') {
		return nil, nil, errors.New("a JSON file that is not an object")
	}
	root, err := readJSONObject(dec, 0)
	if err != nil {
		return nil, nil, err
	}
	var meta map[string]any
	for i, k := range root.keys {
		if k != "sops" {
			continue
		}
		m, ok := plainJSON(root.values[i]).(map[string]any)
		if !ok {
			return nil, nil, errors.New("its sops entry is not an object")
		}
		meta = m
		root.keys = append(root.keys[:i], root.keys[i+1:]...)
		root.values = append(root.values[:i], root.values[i+1:]...)
		break
	}
	return &jsonFile{root: root}, meta, nil
}

// maxJSONDepth bounds how deep a file's objects and arrays nest: the
// reader recurses, and a file from Git must not exhaust its stack.
const maxJSONDepth = 1000

var errTooDeep = fmt.Errorf("objects and arrays nested deeper than %d", maxJSONDepth)

func readJSONObject(dec *json.Decoder, depth int) (*jsonObject, error) {
	if depth > maxJSONDepth {
		return nil, errTooDeep
	}
	o := &jsonObject{}
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		if tok == json.Delim('}') {
			return o, nil
		}
		key, ok := tok.(string)
		if !ok {
			return nil, errors.New("a JSON object key that is not a string")
		}
		v, err := readJSONValue(dec, depth+1)
		if err != nil {
			return nil, err
		}
		o.keys, o.values = append(o.keys, key), append(o.values, v)
	}
}

// readJSONValue reads a value; numbers are ints where they are whole and
// fit, float64s otherwise, as SOPS reads them.
func readJSONValue(dec *json.Decoder, depth int) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, io.ErrUnexpectedEOF
		}
		return nil, err
	}
	switch tok {
	case json.Delim('{'):
		return readJSONObject(dec, depth)
	case json.Delim('['):
		if depth > maxJSONDepth {
			return nil, errTooDeep
		}
		a := &jsonArray{}
		for dec.More() {
			v, err := readJSONValue(dec, depth+1)
			if err != nil {
				return nil, err
			}
			a.items = append(a.items, v)
		}
		_, err := dec.Token() // ]
		return a, err
	}
	if n, ok := tok.(json.Number); ok {
		if i, err := n.Int64(); err == nil {
			return int(i), nil
		}
		return n.Float64()
	}
	return tok, nil
}

// plainJSON is a value as maps and slices, for the metadata.
func plainJSON(v any) any {
	switch v := v.(type) {
	case *jsonObject:
		m := map[string]any{}
		for i, k := range v.keys {
			m[k] = plainJSON(v.values[i])
		}
		return m
	case *jsonArray:
		l := make([]any, len(v.items))
		for i, e := range v.items {
			l[i] = plainJSON(e)
		}
		return l
	}
	return v
}

func (f *jsonFile) leaves([]byte) ([]leaf, error) {
	var out []leaf
	jsonLeaves(f.root, nil, &out)
	return out, nil
}

func jsonLeaves(v any, path []string, out *[]leaf) {
	switch v := v.(type) {
	case *jsonObject:
		for i := range v.keys {
			jsonChild(&v.values[i], append(path[:len(path):len(path)], v.keys[i]), out)
		}
	case *jsonArray:
		for i := range v.items {
			before := len(*out)
			jsonChild(&v.items[i], path, out)
			if len(*out) > before && isScalar(v.items[i]) {
				(*out)[before].inList = true
			}
		}
	}
}

func isScalar(v any) bool {
	switch v.(type) {
	case *jsonObject, *jsonArray, nil:
		return false
	}
	return true
}

func jsonChild(at *any, path []string, out *[]leaf) {
	switch (*at).(type) {
	case *jsonObject, *jsonArray:
		jsonLeaves(*at, path, out)
	case nil:
	default:
		*out = append(*out, leaf{path: path, value: *at, set: func(v any) { *at = v }})
	}
}

func (f *jsonFile) emit() ([]byte, error) {
	var b bytes.Buffer
	if err := writeJSON(&b, f.root); err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, b.Bytes(), "", "\t"); err != nil { // as sops --decrypt writes JSON
		return nil, err
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}

func writeJSON(b *bytes.Buffer, v any) error {
	switch v := v.(type) {
	case *jsonObject:
		b.WriteByte('{')
		for i, k := range v.keys {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := writeJSON(b, k); err != nil {
				return err
			}
			b.WriteByte(':')
			if err := writeJSON(b, v.values[i]); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	case *jsonArray:
		b.WriteByte('[')
		first := true
		for _, e := range v.items {
			if _, isComment := e.(comment); isComment {
				continue // JSON has none
			}
			if !first {
				b.WriteByte(',')
			}
			first = false
			if err := writeJSON(b, e); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	default:
		data, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("writing a value of type %T", v)
		}
		b.Write(data)
	}
	return nil
}
