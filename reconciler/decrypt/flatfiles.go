package decrypt

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/ini.v1"
)

// dotenvFile is a dotenv file: KEY=VALUE lines and # comments. SOPS
// reads "\n" in a value as a newline, and keeps its entry in sops_*
// lines, flattened (unflatten).
type dotenvFile struct {
	lines []dotenvLine
}

type dotenvLine struct {
	comment    bool
	key, value string
}

func readDotenv(data []byte) (document, map[string]any, error) {
	f := &dotenvFile{}
	flat := map[string]string{}
	for n, raw := range strings.Split(string(data), "\n") {
		switch {
		case raw == "":
		case raw[0] == '#':
			f.lines = append(f.lines, dotenvLine{comment: true, value: raw[1:]})
		default:
			key, value, ok := strings.Cut(raw, "=")
			if !ok {
				return nil, nil, fmt.Errorf("line %d is neither KEY=VALUE nor a # comment", n+1)
			}
			value = strings.ReplaceAll(value, `\n`, "\n")
			if name, isSops := strings.CutPrefix(key, "sops_"); isSops {
				flat[name] = value
				continue
			}
			f.lines = append(f.lines, dotenvLine{key: key, value: value})
		}
	}
	meta, err := unflatten(flat)
	return f, meta, err
}

func (f *dotenvFile) leaves(key []byte) ([]leaf, error) {
	var out []leaf
	for i := range f.lines {
		l := &f.lines[i]
		if l.comment {
			l.value = openComment(l.value, key, nil)
		} else {
			out = append(out, leaf{path: []string{l.key}, value: l.value, set: func(v any) { l.value = fmt.Sprint(v) }})
		}
	}
	return out, nil
}

func (f *dotenvFile) emit() ([]byte, error) {
	var b bytes.Buffer
	for _, l := range f.lines {
		switch {
		case l.comment:
			fmt.Fprintf(&b, "#%s\n", l.value)
		default:
			fmt.Fprintf(&b, "%s=%s\n", l.key, strings.ReplaceAll(l.value, "\n", `\n`))
		}
	}
	return b.Bytes(), nil
}

// iniFile is an INI file: each value under its section's name. SOPS
// keeps its entry in the [sops] section, flattened, with newlines
// written as "\n".
type iniFile struct {
	file *ini.File
}

func readINI(data []byte) (document, map[string]any, error) {
	file, err := ini.LoadSources(ini.LoadOptions{AllowNonUniqueSections: true}, data)
	if err != nil {
		return nil, nil, err
	}
	flat := map[string]string{}
	for _, s := range file.Sections() {
		if s.Name() != "sops" {
			continue
		}
		for _, k := range s.Keys() {
			flat[k.Name()] = strings.ReplaceAll(k.Value(), `\n`, "\n")
		}
	}
	file.DeleteSection("sops")
	meta, err := unflatten(flat)
	return &iniFile{file: file}, meta, err
}

func (f *iniFile) leaves(key []byte) ([]leaf, error) {
	var out []leaf
	for _, s := range f.file.Sections() {
		section := []string{s.Name()}
		s.Comment = openComment(iniComment(s.Comment), key, section)
		for _, k := range s.Keys() {
			k.Comment = openComment(iniComment(k.Comment), key, section)
			out = append(out, leaf{path: []string{s.Name(), k.Name()}, value: k.Value(), set: func(v any) { k.SetValue(fmt.Sprint(v)) }})
		}
	}
	return out, nil
}

// iniComment is a comment without its leading ; or # and spaces, as
// SOPS reads it.
func iniComment(c string) string {
	for _, mark := range []string{";", "#"} {
		if strings.HasPrefix(c, mark) {
			return strings.TrimLeft(c, mark+" ")
		}
	}
	return c
}

func (f *iniFile) emit() ([]byte, error) {
	var b bytes.Buffer
	_, err := f.file.WriteTo(&b)
	return b.Bytes(), err
}

// A flat key names a place in a tree: name__map_key descends into a
// mapping, name__list_3 into a list's fourth item.
var flatStep = regexp.MustCompile(`__(map|list)_`)

// unflatten rebuilds the sops entry of a flat format from its keys; nil
// when there are none.
func unflatten(flat map[string]string) (map[string]any, error) {
	if len(flat) == 0 {
		return nil, nil
	}
	var root any = map[string]any{}
	for key, value := range flat {
		var err error
		if root, err = place(root, splitFlat(key), value); err != nil {
			return nil, fmt.Errorf("sops entry %s: %w", key, err)
		}
	}
	m, _ := root.(map[string]any)
	return m, nil
}

// flatStepOf is one step of a flat key: a mapping's key, or a list's
// index (isIndex).
type flatStepOf struct {
	key     string
	index   int
	isIndex bool
}

func splitFlat(key string) []flatStepOf {
	steps := []flatStepOf{{key: key}}
	locs := flatStep.FindAllStringSubmatchIndex(key, -1)
	if len(locs) == 0 {
		return steps
	}
	steps[0].key = key[:locs[0][0]]
	for i, loc := range locs {
		end := len(key)
		if i+1 < len(locs) {
			end = locs[i+1][0]
		}
		part := key[loc[1]:end]
		if key[loc[2]:loc[3]] == "list" {
			n, _ := strconv.Atoi(part)
			steps = append(steps, flatStepOf{index: n, isIndex: true})
		} else {
			steps = append(steps, flatStepOf{key: part})
		}
	}
	return steps
}

// place puts value at the steps below node and returns the node.
func place(node any, steps []flatStepOf, value string) (any, error) {
	if len(steps) == 0 {
		return value, nil
	}
	s := steps[0]
	if s.isIndex {
		l, _ := node.([]any)
		if s.index < 0 || s.index > 1024 {
			return nil, errors.New("a list index out of range")
		}
		for len(l) <= s.index {
			l = append(l, nil)
		}
		child, err := place(l[s.index], steps[1:], value)
		l[s.index] = child
		return l, err
	}
	m, ok := node.(map[string]any)
	if !ok {
		m = map[string]any{}
	}
	child, err := place(m[s.key], steps[1:], value)
	m[s.key] = child
	return m, err
}
