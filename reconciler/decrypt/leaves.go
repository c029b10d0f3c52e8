package decrypt

import (
	"crypto/sha512"
	"crypto/subtle"
	"fmt"
	"strings"
)

// document is a file in one of SOPS's formats, read with its sops entry
// taken out.
type document interface {
	// leaves are its values in the order SOPS walks them: keys in the
	// order written, list items in order, comments left out (they are
	// not in the MAC). Its comments are opened with the data key on the
	// way (openComment).
	leaves(key []byte) ([]leaf, error)
	// emit writes the file as it stands.
	emit() ([]byte, error)
}

// leaf is one value of a document.
type leaf struct {
	// path are the keys above the value (a list's items add none): the
	// additional data its envelope was sealed with.
	path []string
	// value is as SOPS reads it: a string (an envelope, if sealed), an
	// int, a float64, a bool or a time.Time.
	value any
	// set puts the opened value in the envelope's place.
	set func(any)
	// inList: the value is a list's item, which may be a comment SOPS
	// sealed as an item.
	inList bool
}

// macOnlyEncryptedInit starts the MAC of a file written with
// mac_only_encrypted, so that its MAC differs from one over all values
// (a constant of SOPS's file format).
var macOnlyEncryptedInit = []byte{0x8a, 0x3f, 0xd2, 0xad, 0x54, 0xce, 0x66, 0x52, 0x7b, 0x10, 0x34, 0xf3, 0xd1, 0x47, 0xbe, 0xb,
	0xb, 0x97, 0x5b, 0x3b, 0xf4, 0x4f, 0x72, 0xc6, 0xfd, 0xad, 0xec, 0x81, 0x76, 0xf2, 0x7d, 0x69}

// openLeaves opens every sealed value in place with the data key and
// checks the file's MAC: a SHA-512 over the values in walk order (only
// the sealed ones with mac_only_encrypted), sealed itself under the time
// the file was last changed. It returns the opened values. Its errors
// name a value's path, never a value.
func openLeaves(leaves []leaf, key []byte, md metadata) ([]string, error) {
	h := sha512.New()
	if md.macOnlyEncrypted {
		h.Write(macOnlyEncryptedInit)
	}
	var opened []string
	for _, l := range leaves {
		v := l.value
		s, isString := v.(string)
		wasSealed := isString && sealed(s)
		if wasSealed {
			var err error
			if v, err = open(s, key, strings.Join(l.path, ":")+":"); err != nil {
				return nil, fmt.Errorf("the value at %s: %w", pathName(l.path), err)
			}
			if _, isComment := v.(comment); isComment {
				// SOPS writes a list's comments as sealed items; they are
				// not in the MAC.
				if !l.inList {
					return nil, fmt.Errorf("the value at %s is a sealed comment", pathName(l.path))
				}
				l.set(v)
				continue
			}
			l.set(v)
			opened = append(opened, fmt.Sprint(v))
		}
		if md.macOnlyEncrypted && !wasSealed {
			continue
		}
		b, err := macBytes(v)
		if err != nil {
			return nil, fmt.Errorf("the value at %s: %w", pathName(l.path), err)
		}
		h.Write(b)
	}
	mac, err := open(md.mac, key, md.lastModified)
	stored, _ := mac.(string)
	if err != nil || subtle.ConstantTimeCompare([]byte(stored), []byte(fmt.Sprintf("%X", h.Sum(nil)))) != 1 {
		return nil, fmt.Errorf("its MAC does not match its values: the file was changed after SOPS encrypted it; edit it with sops, or encrypt it again")
	}
	return opened, nil
}

func pathName(path []string) string {
	if len(path) == 0 {
		return "the top"
	}
	return strings.Join(path, ".")
}

// openComment is a comment's text opened, if SOPS sealed it: with the
// path of the mapping or list that holds it. A sealed comment that does
// not open is left out, as the build does not read comments.
func openComment(text string, key []byte, path []string) string {
	if !sealed(strings.TrimSpace(text)) {
		return text
	}
	v, err := open(strings.TrimSpace(text), key, strings.Join(path, ":")+":")
	if c, ok := v.(comment); ok && err == nil {
		return string(c)
	}
	return ""
}
