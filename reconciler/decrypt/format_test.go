package decrypt_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/strata-gitops/strata/internal/testing/sopstest"
	"github.com/strata-gitops/strata/internal/testing/testenv"
	"github.com/strata-gitops/strata/reconciler/decrypt"
)

const richYAML = `# the database's Secret
apiVersion: v1
kind: Secret
metadata:
  name: db
  labels: {tier: "3"}
# the values
stringData:
  # the password
  password: hunter2 # the old one
  port: 5432
  ratio: 0.25
  enabled: true
  quoted: "123"
  multi: |
    line one
    line two
  list:
    # about the items
    - a
    - 7 # seven
    - nested: x
      # under nested
      deeper: {y: z}
  empty: ""
  nothing: null
  note_unencrypted: visible
---
apiVersion: v1
kind: ConfigMap
metadata: {name: second}
data:
  k: v
`

const richJSON = `{"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db"},
 "stringData": {"password": "hunter2", "port": 5432, "ratio": 0.25, "big": 1e21, "enabled": false,
  "list": ["a", 7, {"nested": "x"}], "nothing": null, "note_unencrypted": "visible"}}`

// Files the real sops CLI encrypted under each kind of rule decrypt to
// what sops --decrypt gives: values of every type, lists, several YAML
// documents, comments, values left in the clear, a MAC over the
// encrypted values only.
func TestFilesDecryptAsSopsDecryptsThem(t *testing.T) {
	key := sopstest.NewKey(t)
	d, err := decrypt.FromSecret("flux-system/sops-age", map[string][]byte{"age.agekey": []byte(key.Identity)})
	if err != nil {
		t.Fatal(err)
	}
	rule := func(extra string) string {
		return "creation_rules:\n  - age: " + key.Recipient + "\n" + extra
	}
	for _, c := range []struct {
		name, file, content, config string
	}{
		{"every value", "secret.yaml", richYAML, rule("")},
		{"data only, MAC over encrypted values", "secret.yaml", richYAML, rule("    encrypted_regex: ^(data|stringData)$\n    mac_only_encrypted: true\n")},
		{"unencrypted regex", "secret.yaml", richYAML, rule("    unencrypted_regex: ^(kind|apiVersion|name)$\n")},
		{"json", "secret.json", richJSON, rule("")},
		{"json, data only", "secret.json", richJSON, rule("    encrypted_regex: ^stringData$\n")},
		{"dotenv", "db.env", "# the database\nPASSWORD=hunter2\nMULTI=a\\nb\nPORT=5432\nNOTE_unencrypted=visible\n", rule("")},
		{"ini", "db.ini", "; the database\n[db]\npassword = hunter2 ; old\nport = 5432\n\n[cache]\nsize = 1Gi\n", rule("")},
	} {
		t.Run(c.name, func(t *testing.T) {
			enc := sopstest.EncryptWithConfig(t, c.file, c.content, c.config)
			if strings.Contains(enc, "hunter2") {
				t.Fatalf("sops left the password in the clear:\n%s", enc)
			}
			want := sopstest.Decrypt(t, c.file, enc, key.Identity)
			got, was, err := d.File(c.file, []byte(enc))
			if err != nil || !was {
				t.Fatalf("decrypting: %v (encrypted: %v)", err, was)
			}
			sameContent(t, c.file, string(got), want)
			if strings.Contains(string(got), "ENC[") {
				t.Errorf("an envelope is left in the output:\n%s", got)
			}
		})
	}
}

// sameContent compares two decrypted files as the build reads them:
// YAML and JSON by their values, dotenv and INI by their lines.
func sameContent(t *testing.T, name, got, want string) {
	t.Helper()
	var g, w any
	switch {
	case strings.HasSuffix(name, ".yaml"):
		g, w = []any{yamlDocs(t, got), commentsOf(got)}, []any{yamlDocs(t, want), commentsOf(want)}
	case strings.HasSuffix(name, ".json"):
		if err := json.Unmarshal([]byte(got), &g); err != nil {
			t.Fatalf("%v:\n%s", err, got)
		}
		if err := json.Unmarshal([]byte(want), &w); err != nil {
			t.Fatal(err)
		}
	default:
		g, w = strings.Fields(got), strings.Fields(want)
	}
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("decrypted:\n%s\nsops --decrypt:\n%s", got, want)
	}
}

// commentsOf are a YAML file's comments, sorted.
func commentsOf(s string) []string {
	var out []string
	for _, line := range strings.Split(s, "\n") {
		if _, c, ok := strings.Cut(line, "#"); ok {
			out = append(out, strings.TrimSpace(c))
		}
	}
	slices.Sort(out)
	return out
}

func yamlDocs(t *testing.T, s string) []any {
	t.Helper()
	var docs []any
	dec := yaml.NewDecoder(strings.NewReader(s))
	for {
		var v any
		err := dec.Decode(&v)
		if errors.Is(err, io.EOF) {
			return docs
		}
		if err != nil {
			t.Fatalf("%v:\n%s", err, s)
		}
		docs = append(docs, v)
	}
}

// A file encrypted for three key groups with a threshold of two opens
// with the keys of any two groups, and not with one.
func TestKeyGroupsNeedTheirThreshold(t *testing.T) {
	keys := []sopstest.Key{sopstest.NewKey(t), sopstest.NewKey(t), sopstest.NewKey(t)}
	config := "creation_rules:\n  - shamir_threshold: 2\n    key_groups:\n"
	for _, k := range keys {
		config += "      - age: [" + k.Recipient + "]\n"
	}
	enc := sopstest.EncryptWithConfig(t, "secret.yaml", richYAML, config)
	want := sopstest.Decrypt(t, "secret.yaml", enc, keys[0].Identity+"\n"+keys[2].Identity)

	two, err := decrypt.FromSecret("ns/keys", map[string][]byte{"a.agekey": []byte(keys[0].Identity), "c.agekey": []byte(keys[2].Identity)})
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := two.File("secret.yaml", []byte(enc))
	if err != nil {
		t.Fatalf("two groups' keys: %v", err)
	}
	sameContent(t, "secret.yaml", string(got), want)

	one, err := decrypt.FromSecret("ns/keys", map[string][]byte{"b.agekey": []byte(keys[1].Identity)})
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = one.File("secret.yaml", []byte(enc))
	if !errors.Is(err, decrypt.ErrDecryptionFailed) || !strings.Contains(err.Error(), keys[1].Recipient) {
		t.Fatalf("one group's key: %v; want DecryptionFailed naming the recipients", err)
	}
}

// A file changed after sops encrypted it does not decrypt: a value left
// in the clear edited, or two encrypted values swapped. The error names
// the file and never a value.
func TestAChangedFileDoesNotDecrypt(t *testing.T) {
	key := sopstest.NewKey(t)
	d, err := decrypt.FromSecret("ns/keys", map[string][]byte{"age.agekey": []byte(key.Identity)})
	if err != nil {
		t.Fatal(err)
	}
	enc := sopstest.EncryptWithConfig(t, "secret.yaml", richYAML, "creation_rules:\n  - age: "+key.Recipient+"\n")
	edited := strings.Replace(enc, "note_unencrypted: visible", "note_unencrypted: changed", 1)
	if edited == enc {
		t.Fatalf("no clear value to edit in:\n%s", enc)
	}
	swapped := swapValues(t, enc, "password:", "quoted:")
	for name, file := range map[string]string{"edited": edited, "swapped": swapped} {
		_, _, err := d.File("secret.yaml", []byte(file))
		if !errors.Is(err, decrypt.ErrDecryptionFailed) || !strings.Contains(err.Error(), "secret.yaml") ||
			strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "tampered") {
			t.Errorf("%s: %v; want DecryptionFailed naming the file, without a value", name, err)
		}
	}
}

// swapValues swaps the values of the first lines starting with a and b.
func swapValues(t *testing.T, file, a, b string) string {
	t.Helper()
	lines := strings.Split(file, "\n")
	ia, ib := -1, -1
	for i, l := range lines {
		trimmed := strings.TrimSpace(l)
		if ia < 0 && strings.HasPrefix(trimmed, a) {
			ia = i
		}
		if ib < 0 && strings.HasPrefix(trimmed, b) {
			ib = i
		}
	}
	if ia < 0 || ib < 0 {
		t.Fatalf("no %q or %q in:\n%s", a, b, file)
	}
	_, va, _ := strings.Cut(lines[ia], ": ")
	_, vb, _ := strings.Cut(lines[ib], ": ")
	lines[ia] = strings.Replace(lines[ia], va, vb, 1)
	lines[ib] = strings.Replace(lines[ib], vb, va, 1)
	return strings.Join(lines, "\n")
}

// A plain file, or one in a format SOPS does not write, passes through.
func TestPlainFilesPassThrough(t *testing.T) {
	d, err := decrypt.FromSecret("ns/keys", map[string][]byte{"age.agekey": []byte(sopstest.NewKey(t).Identity)})
	if err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{
		"notes.yaml": "sops: a tool\nmac: none\n",
		"notes.json": `{"sops": {"version": "3"}}`,
		"notes.env":  "sops_version=3\n",
		"notes.ini":  "[sops]\nversion = 3\n",
		"notes.txt":  "sops_mac=x\n",
	} {
		out, was, err := d.File(name, []byte(content))
		if err != nil || was || !bytes.Equal(out, []byte(content)) || decrypt.Encrypted(name, []byte(content)) {
			t.Errorf("%s: %v, encrypted %v", name, err, was)
		}
	}
}

// The example repository's encrypted files decrypt with its key as sops
// --decrypt decrypts them.
func TestTheExampleRepositorysFilesDecryptAsSopsDecryptsThem(t *testing.T) {
	root := testenv.RepoRoot()
	key, err := os.ReadFile(filepath.Join(root, "hack", "homelab-sops.agekey"))
	if err != nil {
		t.Fatal(err)
	}
	d, err := decrypt.FromSecret("flux-system/sops-age", map[string][]byte{"homelab.agekey": key})
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	err = filepath.WalkDir(filepath.Join(root, "clusters"), func(path string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil || !decrypt.Encrypted(path, data) {
			return err
		}
		found++
		got, _, err := d.File(path, data)
		if err != nil {
			t.Errorf("%s: %v", path, err)
			return nil
		}
		sameContent(t, path, string(got), sopstest.Decrypt(t, path, string(data), string(key)))
		return nil
	})
	if err != nil || found == 0 {
		t.Fatalf("walking clusters/: %v; %d encrypted files", err, found)
	}
}

// Hostile files are refused without exhausting the reader: a YAML
// alias bomb beside a genuine SOPS entry fails with DecryptionFailed
// naming the alias; JSON nested ten million deep (past the stack a
// recursive reader would need) is no SOPS file and passes through.
func TestHostileFilesAreRefused(t *testing.T) {
	key := sopstest.NewKey(t)
	d, err := decrypt.FromSecret("ns/keys", map[string][]byte{"age.agekey": []byte(key.Identity)})
	if err != nil {
		t.Fatal(err)
	}
	enc := sopstest.EncryptWithConfig(t, "secret.yaml", "stringData: {password: hunter2}\n", "creation_rules:\n  - age: "+key.Recipient+"\n")
	bomb := "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
	for i := 'b'; i <= 'z'; i++ {
		p := string(i - 1)
		bomb += fmt.Sprintf("%c: &%c [%s]\n", i, i, strings.TrimSuffix(strings.Repeat("*"+p+", ", 10), ", "))
	}
	_, sopsEntry, _ := strings.Cut(enc, "\nsops:")
	_, _, err = d.File("bomb.yaml", []byte(bomb+"sops:"+sopsEntry))
	if !errors.Is(err, decrypt.ErrDecryptionFailed) || !strings.Contains(err.Error(), "alias") || !strings.Contains(err.Error(), "bomb.yaml") {
		t.Errorf("an alias bomb: %v; want DecryptionFailed naming the file and the alias", err)
	}

	const depth = 10_000_000
	deep := []byte(`{"sops": {"mac": "x", "lastmodified": "2026-01-01T00:00:00Z"}, "v": ` + strings.Repeat("[", depth) + strings.Repeat("]", depth) + "}")
	out, was, err := d.File("deep.json", deep)
	if err != nil || was || !bytes.Equal(out, deep) {
		t.Errorf("JSON nested %d deep: %v, encrypted %v; want it passed through as no SOPS file", depth, err, was)
	}
}

// A file naming more keys than a render should try to unwrap is refused
// before any is tried, naming the file and the bound.
func TestAFileNamingTooManyKeysIsRefused(t *testing.T) {
	key := sopstest.NewKey(t)
	d, err := decrypt.FromSecret("ns/keys", map[string][]byte{"age.agekey": []byte(key.Identity)})
	if err != nil {
		t.Fatal(err)
	}
	enc := sopstest.EncryptWithConfig(t, "secret.yaml", "stringData: {password: hunter2}\n", "creation_rules:\n  - age: "+key.Recipient+"\n")
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(enc), &doc); err != nil {
		t.Fatal(err)
	}
	root := doc.Content[0]
	sops := root.Content[len(root.Content)-1]
	ages := sops.Content[1]
	if sops.Content[0].Value != "age" || ages.Kind != yaml.SequenceNode {
		t.Fatalf("no age list first in the sops entry:\n%s", enc)
	}
	if _, _, err := d.File("secret.yaml", []byte(enc)); err != nil {
		t.Fatalf("the file as sops wrote it: %v", err)
	}
	for len(ages.Content) <= 64 {
		ages.Content = append(ages.Content, ages.Content[0])
	}
	many, err := yaml.Marshal(&doc)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = d.File("secret.yaml", many)
	if !errors.Is(err, decrypt.ErrDecryptionFailed) || !strings.Contains(err.Error(), "secret.yaml") || !strings.Contains(err.Error(), "more than the 64") {
		t.Fatalf("%v; want DecryptionFailed naming the file and the bound", err)
	}
}
