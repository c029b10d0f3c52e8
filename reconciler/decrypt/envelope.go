package decrypt

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/base64"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"time"
)

// A value SOPS encrypted is an envelope:
// ENC[AES256_GCM,data:B64,iv:B64,tag:B64,type:TYPE], sealed with AES-GCM
// under the file's data key, with the path of keys above the value as
// additional data, so that a value moved elsewhere in the file does not
// open. TYPE says how SOPS wrote the plaintext.
var envelope = regexp.MustCompile(`^ENC\[AES256_GCM,data:(.+),iv:(.+),tag:(.+),type:(.+)\]`)

// sealed says whether a value is an envelope.
func sealed(s string) bool { return envelope.MatchString(s) }

// comment is the text of a comment SOPS sealed.
type comment string

// open opens an envelope with the data key and the additional data, and
// returns the value as SOPS typed it: a string, an int, a float64, a
// bool, a time.Time, bytes or a comment. An empty value is one SOPS left empty.
func open(s string, key []byte, additional string) (any, error) {
	if s == "" {
		return "", nil
	}
	m := envelope.FindStringSubmatch(s)
	if m == nil {
		return nil, errors.New("not a SOPS envelope (ENC[AES256_GCM,...])")
	}
	var parts [3][]byte
	for i := range parts {
		b, err := base64.StdEncoding.DecodeString(m[i+1])
		if err != nil {
			return nil, errors.New("an envelope's data, iv or tag is not base64")
		}
		parts[i] = b
	}
	data, iv, tag := parts[0], parts[1], parts[2]
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	gcm, err := cipher.NewGCMWithNonceSize(block, len(iv))
	if err != nil {
		return nil, err
	}
	plain, err := gcm.Open(nil, iv, append(data, tag...), []byte(additional))
	if err != nil {
		return nil, errors.New("an envelope does not open with the data key: the file was changed or a value moved; edit it with sops, or encrypt it again")
	}
	return typed(plain, m[4])
}

// typed is a plaintext as the type SOPS wrote it with.
func typed(plain []byte, typ string) (any, error) {
	s := string(plain)
	switch typ {
	case "str":
		return s, nil
	case "int":
		return strconv.Atoi(s)
	case "float":
		return strconv.ParseFloat(s, 64)
	case "bool":
		return strconv.ParseBool(s)
	case "bytes":
		return plain, nil
	case "time":
		var t time.Time
		return t, t.UnmarshalText(plain)
	case "comment":
		return comment(s), nil
	}
	return nil, fmt.Errorf("an envelope of unknown type %q", typ)
}

// macBytes is a value as SOPS feeds it to the file's MAC.
func macBytes(v any) ([]byte, error) {
	switch v := v.(type) {
	case string:
		return []byte(v), nil
	case []byte:
		return v, nil
	case int:
		return []byte(strconv.Itoa(v)), nil
	case float64:
		return []byte(strconv.FormatFloat(v, 'f', -1, 64)), nil
	case bool:
		if v {
			return []byte("True"), nil
		}
		return []byte("False"), nil
	case time.Time:
		return v.MarshalText()
	}
	return nil, fmt.Errorf("a value of type %T, which SOPS does not encrypt", v)
}
