package kustomization_test

import (
	"testing"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestBadInputChangesNothing pushes each kind of broken revision on top of
// a good one: the Kustomization reports it, naming the file or path, and
// the cluster keeps the last applied state, unpruned.
func TestBadInputChangesNothing(t *testing.T) {
	cases := []struct {
		name      string
		files     map[string]string
		fragments []string
	}{
		{"malformed-yaml", map[string]string{"app/broken.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: [unclosed\n"}, []string{"broken.yaml"}},
		{"kustomize-error", map[string]string{"app/kustomization.yaml": "resources:\n- a.yaml\n- missing.yaml\n"}, []string{"missing.yaml"}},
		{"missing-path", map[string]string{"app/a.yaml": "", "app/b.yaml": ""}, []string{"path './app' not found"}},
		{"substitution", map[string]string{"app/a.yaml": configMap("a", "x", "${unterminated")}, []string{"ConfigMap/a"}},
		{"sops-encrypted", map[string]string{"app/creds.yaml": sopsSecret}, []string{"Secret/creds", "SOPS", "spec.decryption"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newStack(t)
			rev := s.push(map[string]string{"app/a.yaml": configMap("a"), "app/b.yaml": configMap("b")})
			s.source(rev)
			s.kustomization("app", "./app", func(k *kustomizev1.Kustomization) {
				k.Spec.PostBuild = &kustomizev1.PostBuild{Substitute: map[string]string{"region": "eu"}}
			})
			s.waitReady("app", rev)

			files := map[string]string{"app/b.yaml": ""}
			for k, v := range tc.files {
				files[k] = v
			}
			bad := s.push(files)
			s.refresh(bad)
			ks := s.waitCondition("app", meta.ReadyCondition, metav1.ConditionFalse, meta.BuildFailedReason, tc.fragments...)
			if ks.Status.LastAppliedRevision != rev || ks.Status.LastAttemptedRevision != bad {
				t.Errorf("revisions: applied %s attempted %s, want %s and %s", ks.Status.LastAppliedRevision, ks.Status.LastAttemptedRevision, rev, bad)
			}
			if !s.exists(cm("a")) || !s.exists(cm("b")) {
				t.Error("a failed build changed the cluster")
			}
		})
	}
}

func TestMissingSourceIsNamed(t *testing.T) {
	s := newStack(t)
	s.kustomization("app", "./app", nil)
	s.waitCondition("app", meta.ReadyCondition, metav1.ConditionFalse, meta.ArtifactFailedReason, "GitRepository/"+s.ns+"/flux-system", "not found")
}

// sopsSecret is a Secret as `sops --encrypt` leaves it in Git.
const sopsSecret = `apiVersion: v1
kind: Secret
metadata:
  name: creds
stringData:
  password: ENC[AES256_GCM,data:Zm9v,iv:YmFy,tag:YmF6,type:str]
sops:
  age:
    - recipient: age1qqqq
      enc: |
        -----BEGIN AGE ENCRYPTED FILE-----
        YWJj
        -----END AGE ENCRYPTED FILE-----
  lastmodified: "2026-11-26T00:00:00Z"
  mac: ENC[AES256_GCM,data:bWFj,iv:aXY=,tag:dGFn,type:str]
  version: 3.9.0
`
