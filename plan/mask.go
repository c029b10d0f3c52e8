package plan

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// minSubstring is the shortest revealed value masked inside longer
// strings; a shorter one ("1", "on") is masked only where it is a whole
// value, or every number and word of the plan would be masked.
const minSubstring = 4

// masker hides every value SOPS decryption revealed (--decryption-key-file),
// in any kind and any field, before anything is printed. Each value becomes
// ***sops:<tag>, the tag a keyed hash with a key made for this plan alone,
// so that both sides compare as Secrets do (the same tag: unchanged) and a
// short or guessable value cannot be found from its tag.
type masker struct {
	key      []byte
	whole    map[string]string
	replacer *strings.Replacer
}

// newMasker masks values (longest first); nil when there are none.
func newMasker(values []string) *masker {
	if len(values) == 0 {
		return nil
	}
	m := &masker{key: make([]byte, 32), whole: map[string]string{}}
	_, _ = rand.Read(m.key)
	var pairs []string
	for _, v := range withDecoded(values) {
		m.whole[v] = m.tag(v)
		if len(v) >= minSubstring {
			pairs = append(pairs, v, m.whole[v])
		}
	}
	m.replacer = strings.NewReplacer(pairs...)
	return m
}

func (m *masker) tag(v string) string {
	h := hmac.New(sha256.New, m.key)
	h.Write([]byte(v))
	return "***sops:" + hex.EncodeToString(h.Sum(nil))[:12]
}

func (m *masker) text(s string) string {
	if t, ok := m.whole[s]; ok {
		return t
	}
	return m.replacer.Replace(s)
}

// object is a copy of o with every string masked, keys included.
func (m *masker) object(o *unstructured.Unstructured) *unstructured.Unstructured {
	if m == nil || o == nil {
		return o
	}
	return &unstructured.Unstructured{Object: m.value(o.Object).(map[string]any)}
}

func (m *masker) value(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			out[m.text(k)] = m.value(e)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = m.value(e)
		}
		return out
	case string:
		return m.text(t)
	case bool, int64, float64, int:
		// An encrypted number or boolean is revealed as its text.
		if tag, ok := m.whole[fmt.Sprint(t)]; ok {
			return tag
		}
		return t
	default:
		return t
	}
}

// plan masks every string the plan holds, in place: reasons, errors and
// warnings quote values too, and a diff's YAML is checked once more.
func (m *masker) plan(p *Plan) {
	if m == nil {
		return
	}
	m.strings(reflect.ValueOf(p).Elem())
}

func (m *masker) strings(v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		if v.CanSet() {
			v.SetString(m.text(v.String()))
		}
	case reflect.Struct:
		for i := range v.NumField() {
			m.strings(v.Field(i))
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			m.strings(v.Index(i))
		}
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			m.strings(v.Elem())
		}
	case reflect.Map:
		for _, k := range v.MapKeys() {
			e := reflect.New(v.Type().Elem()).Elem()
			e.Set(v.MapIndex(k))
			m.strings(e)
			v.SetMapIndex(k, e)
		}
	}
}

// withDecoded adds, to values, what each base64 value decodes to when that
// is text: a Secret's data is SOPS-encrypted as base64, and
// postBuild.substituteFrom puts the decoded value into other objects.
func withDecoded(values []string) []string {
	out := slices.Clone(values)
	for _, v := range values {
		if d, err := base64.StdEncoding.DecodeString(v); err == nil && len(d) > 0 && utf8.Valid(d) {
			out = append(out, string(d))
		}
	}
	slices.SortStableFunc(out, func(a, b string) int { return len(b) - len(a) })
	return slices.Compact(out)
}
