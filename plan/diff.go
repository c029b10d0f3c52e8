package plan

import (
	"strings"

	"github.com/pmezard/go-difflib/difflib"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// diff is a unified diff of the two objects as YAML; either may be nil.
// Secret values are masked first.
func diff(before, after *unstructured.Unstructured) string {
	before, after = maskSecrets(before, after)
	text := func(o *unstructured.Unstructured) string {
		if o == nil {
			return ""
		}
		data, err := yaml.Marshal(withoutNullTimestamp(o).Object)
		if err != nil {
			return err.Error()
		}
		return string(data)
	}
	out, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A: difflib.SplitLines(text(before)), B: difflib.SplitLines(text(after)),
		FromFile: "before", ToFile: "after", Context: 3,
	})
	if err != nil {
		return err.Error()
	}
	return out
}

// withoutNullTimestamp drops the `creationTimestamp: null` that rendering
// leaves on every object: it is noise in a diff, never a change.
func withoutNullTimestamp(o *unstructured.Unstructured) *unstructured.Unstructured {
	if ts, found, _ := unstructured.NestedFieldNoCopy(o.Object, "metadata", "creationTimestamp"); !found || ts != nil {
		return o
	}
	o = o.DeepCopy()
	unstructured.RemoveNestedField(o.Object, "metadata", "creationTimestamp")
	return o
}

const (
	masked       = "***"
	maskedBefore = "*** (before)"
	maskedAfter  = "*** (after)"
)

// maskSecrets returns copies of Secrets with every value replaced: equal
// values by ***, changed ones by *** (before) and *** (after), so that a
// diff shows which keys change and never what they hold.
func maskSecrets(before, after *unstructured.Unstructured) (*unstructured.Unstructured, *unstructured.Unstructured) {
	isSecret := func(o *unstructured.Unstructured) bool {
		return o != nil && o.GetAPIVersion() == "v1" && o.GetKind() == "Secret"
	}
	if !isSecret(before) && !isSecret(after) {
		return before, after
	}
	if before != nil {
		before = before.DeepCopy()
	}
	if after != nil {
		after = after.DeepCopy()
	}
	for _, field := range []string{"data", "stringData"} {
		b, _, _ := unstructured.NestedMap(objectOf(before), field)
		a, _, _ := unstructured.NestedMap(objectOf(after), field)
		for k, v := range b {
			if av, ok := a[k]; ok && av == v {
				b[k], a[k] = masked, masked
			} else {
				b[k] = maskedBefore
			}
		}
		for k := range a {
			if a[k] != masked {
				a[k] = maskedAfter
			}
		}
		setIfPresent(before, b, field)
		setIfPresent(after, a, field)
	}
	for _, o := range []*unstructured.Unstructured{before, after} {
		summarizeSops(o)
	}
	return before, after
}

// summarizeSops replaces a SOPS-encrypted Secret's metadata (data keys,
// MAC) with the recipients it is encrypted for: the plan has no key, and
// shows an encrypted Secret as changed or not by its cipher text, with no
// value.
func summarizeSops(o *unstructured.Unstructured) {
	if o == nil {
		return
	}
	meta, ok := o.Object["sops"].(map[string]any)
	if !ok {
		return
	}
	var recipients []string
	for _, kind := range []string{"age", "pgp", "kms", "gcp_kms", "azure_kv", "hc_vault"} {
		list, _ := meta[kind].([]any)
		for _, k := range list {
			if m, ok := k.(map[string]any); ok {
				for _, field := range []string{"recipient", "fp", "arn", "resource_id", "vault_address"} {
					if v, ok := m[field].(string); ok {
						recipients = append(recipients, kind+":"+v)
					}
				}
			}
		}
	}
	o.Object["sops"] = "encrypted by SOPS for " + strings.Join(recipients, ", ")
}

func objectOf(o *unstructured.Unstructured) map[string]any {
	if o == nil {
		return nil
	}
	return o.Object
}

func setIfPresent(o *unstructured.Unstructured, m map[string]any, field string) {
	if o == nil || m == nil {
		return
	}
	_ = unstructured.SetNestedMap(o.Object, m, field)
}

// indent prefixes every line of s.
