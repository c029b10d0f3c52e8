package decrypt

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// yamlFile is a YAML file of one or more documents, each a mapping (or
// empty). SOPS's entry is the first document's sops key; later
// documents' are dropped, as SOPS drops them.
type yamlFile struct {
	docs []*yaml.Node
}

// readYAML reads a YAML file and takes out its sops entry, nil when it
// has none.
func readYAML(data []byte) (document, map[string]any, error) {
	f := &yamlFile{}
	var meta map[string]any
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		doc := &yaml.Node{}
		err := dec.Decode(doc)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, nil, err
		}
		m, err := takeSopsEntry(doc)
		if err != nil {
			return nil, nil, err
		}
		if len(f.docs) == 0 {
			meta = m
		}
		f.docs = append(f.docs, doc)
	}
	return f, meta, nil
}

// takeSopsEntry removes the sops key of a document's mapping and
// returns its value.
func takeSopsEntry(doc *yaml.Node) (map[string]any, error) {
	if len(doc.Content) == 0 {
		return nil, nil
	}
	root := doc.Content[0]
	switch {
	case root.Kind == yaml.ScalarNode && root.ShortTag() == "!!null":
		return nil, nil
	case root.Kind != yaml.MappingNode:
		return nil, errors.New("a YAML document that is not a mapping")
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value != "sops" {
			continue
		}
		var m map[string]any
		if err := root.Content[i+1].Decode(&m); err != nil {
			return nil, errors.New("its sops entry is not a mapping")
		}
		root.Content = slices.Delete(root.Content, i, i+2)
		return m, nil
	}
	return nil, nil
}

func (f *yamlFile) leaves(key []byte) ([]leaf, error) {
	var out []leaf
	c := comments{key: key}
	for _, doc := range f.docs {
		c.open(doc, nil)
		if len(doc.Content) > 0 {
			c.open(doc.Content[0], nil)
		}
		if err := yamlLeaves(doc, nil, &out, c); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// yamlLeaves walks a node as SOPS walks its tree: a mapping's values
// under their keys, a sequence's items under the sequence's path. On the way it opens the comments of the
// nodes below n with the path SOPS sealed them under: that of the
// mapping or sequence whose tree holds them.
func yamlLeaves(n *yaml.Node, path []string, out *[]leaf, c comments) error {
	switch n.Kind {
	case yaml.DocumentNode, yaml.SequenceNode:
		for _, item := range n.Content {
			if n.Kind == yaml.SequenceNode {
				c.open(item, path)
			}
			before := len(*out)
			if err := yamlLeaves(item, path, out, c); err != nil {
				return err
			}
			if n.Kind == yaml.SequenceNode && item.Kind == yaml.ScalarNode && len(*out) > before {
				(*out)[before].inList = true
			}
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			key, value := n.Content[i], n.Content[i+1]
			below := append(slices.Clip(path), key.Value)
			c.open(key, path)
			if value.Kind == yaml.ScalarNode || value.Kind == yaml.AliasNode {
				c.open(value, path)
			} else {
				c.open(value, below)
			}
			if err := yamlLeaves(value, below, out, c); err != nil {
				return err
			}
		}
	case yaml.AliasNode:
		// SOPS writes every value out, never an alias; one in an
		// encrypted file was added by hand, and following aliases could
		// multiply the work without bound.
		return fmt.Errorf("a YAML alias (*%s) at %s, which SOPS does not write", n.Value, pathName(path))
	case yaml.ScalarNode:
		var v any
		if err := n.Decode(&v); err != nil {
			return err
		}
		if v != nil {
			*out = append(*out, leaf{path: path, value: v, set: func(v any) { setScalar(n, v) }})
		}
	}
	return nil
}

// commentTag marks a list item that is a comment SOPS sealed as one;
// emit makes it a comment again.
const commentTag = "!strata-sops-comment"

// setScalar makes n the scalar of v, tagged so that it reads back as
// the type SOPS wrote (a string "123" stays a string), its comments
// kept.
func setScalar(n *yaml.Node, v any) {
	if c, ok := v.(comment); ok {
		n.Tag, n.Value = commentTag, string(c)
		return
	}
	head, line, foot := n.HeadComment, n.LineComment, n.FootComment
	if err := n.Encode(v); err != nil {
		n.Kind, n.Tag, n.Style, n.Value = yaml.ScalarNode, "!!str", 0, fmt.Sprint(v)
	}
	n.HeadComment, n.LineComment, n.FootComment = head, line, foot
}

// comments opens a node's comment lines SOPS sealed (#ENC[...]) with
// the path they sit under.
type comments struct {
	key []byte
}

func (c comments) open(n *yaml.Node, path []string) {
	for _, text := range []*string{&n.HeadComment, &n.LineComment, &n.FootComment} {
		if strings.Contains(*text, "ENC[") {
			lines := strings.Split(*text, "\n")
			for i, line := range lines {
				lines[i] = "#" + openComment(strings.TrimPrefix(line, "#"), c.key, path)
			}
			*text = strings.Join(lines, "\n")
		}
	}
}

// liftComments turns the comment items of n's sequences back into
// comments: on the item that follows, or after the last.
func liftComments(n *yaml.Node) {
	for _, c := range n.Content {
		liftComments(c)
	}
	if n.Kind != yaml.SequenceNode {
		return
	}
	var items []*yaml.Node
	var pending []string
	for _, item := range n.Content {
		if item.Tag == commentTag {
			pending = append(pending, "#"+item.Value)
			continue
		}
		if len(pending) > 0 {
			item.HeadComment = strings.Join(append(pending, item.HeadComment), "\n")
			item.HeadComment = strings.TrimSuffix(item.HeadComment, "\n")
			pending = nil
		}
		items = append(items, item)
	}
	if len(pending) > 0 {
		at := n
		if len(items) > 0 {
			at = items[len(items)-1]
		}
		at.FootComment = strings.TrimPrefix(at.FootComment+"\n"+strings.Join(pending, "\n"), "\n")
	}
	n.Content = items
}

func (f *yamlFile) emit() ([]byte, error) {
	for _, doc := range f.docs {
		liftComments(doc)
	}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(4) // as sops --decrypt writes YAML
	for _, doc := range f.docs {
		if err := enc.Encode(doc); err != nil {
			return nil, err
		}
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
