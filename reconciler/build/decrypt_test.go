package build_test

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/strata-gitops/strata/internal/testing/sopstest"
	"github.com/strata-gitops/strata/reconciler/build"
	"github.com/strata-gitops/strata/reconciler/decrypt"
)

// A Kustomization's encrypted Secret and the encrypted env file of its
// secretGenerator decrypt as kustomize reads them; without a decrypter
// the encrypted object is refused, naming it.
func TestEncryptedFilesRenderWithTheKey(t *testing.T) {
	key := sopstest.NewKey(t)
	const password, token = "hunter2-in-git", "generated-token"
	root := writeTree(t, map[string]string{
		"app/kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- secret.yaml\n" +
			"secretGenerator:\n- name: api\n  envs:\n  - api.env\ngeneratorOptions:\n  disableNameSuffixHash: true\n",
		"app/secret.yaml": sopstest.Encrypt(t, "secret.yaml", "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\nstringData:\n  password: "+password+"\n", key.Recipient),
		"app/api.env":     sopstest.Encrypt(t, "api.env", "TOKEN="+token+"\n", key.Recipient),
	})
	ks := &kustomizev1.Kustomization{}
	ks.Name, ks.Namespace = "app", "flux-system"
	ks.Spec = kustomizev1.KustomizationSpec{Path: "./app"}
	dec, err := decrypt.FromSecret("flux-system/sops-age", map[string][]byte{"age.agekey": []byte(key.Identity)})
	if err != nil {
		t.Fatal(err)
	}
	rendered, err := build.RenderDecrypting(context.Background(), root, ks, nil, dec)
	if err != nil {
		t.Fatal(err)
	}
	values := map[string]string{}
	for _, o := range rendered.Objects {
		if _, ok := o.Object["sops"]; ok {
			t.Errorf("%s %s keeps its sops metadata", o.GetKind(), o.GetName())
		}
		for k, v := range stringMap(o, "stringData") {
			values[o.GetName()+"/"+k] = v
		}
		for k, v := range stringMap(o, "data") {
			dec, _ := base64.StdEncoding.DecodeString(v)
			values[o.GetName()+"/"+k] = string(dec)
		}
	}
	if values["db/password"] != password || values["api/TOKEN"] != token {
		t.Fatalf("decrypted values %v, want db/password and api/TOKEN", values)
	}
	_, err = build.Render(context.Background(), root, ks, nil)
	if err == nil || !strings.Contains(err.Error(), "is encrypted with SOPS: set the Kustomization's spec.decryption") ||
		strings.Contains(err.Error(), password) {
		t.Fatalf("a render without the key: %v", err)
	}
}

func stringMap(o *unstructured.Unstructured, field string) map[string]string {
	m, _, _ := unstructured.NestedStringMap(o.Object, field)
	return m
}
