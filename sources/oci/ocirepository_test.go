package oci_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/strata-gitops/strata/internal/status"
	"github.com/strata-gitops/strata/internal/testing/testenv"
)

var manifests = map[string]string{
	"apps/config.yaml":   "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n",
	"apps/notes.md":      "left out by spec.ignore\n",
	"apps/.sourceignore": "draft.yaml\n",
	"apps/draft.yaml":    "left out by .sourceignore\n",
}

// An artifact pushed by flux push artifact is pulled by tag: Flux's
// revision, the files of its layer but those ignored, the manifest's
// annotations as the artifact's metadata; a new push under the tag is
// the next revision.
func TestATagIsPulledAsFluxPushedIt(t *testing.T) {
	f := setup(t, nil)
	digest := f.push(t, "app:v1", manifests)
	f.create(t, "app", "app", func(o *sourcev1.OCIRepository) {
		o.Spec.Reference = &sourcev1.OCIRepositoryRef{Tag: "v1"}
		o.Spec.Ignore = ptr("*.md\n")
	})
	obj := f.waitRevision(t, "app", "v1@"+digest)
	files := f.artifactFiles(t, obj)
	if _, ok := files["apps/config.yaml"]; !ok || len(files) != 2 {
		t.Fatalf("artifact files: %v; want apps/config.yaml and apps/.sourceignore only", keys(files))
	}
	if got := obj.Status.Artifact.Metadata["org.opencontainers.image.revision"]; !strings.HasPrefix(got, "main@sha1:") {
		t.Fatalf("artifact metadata %v lacks the pushed revision", obj.Status.Artifact.Metadata)
	}
	if out := testenv.Flux(t, f.env, "get", "sources", "oci", "-n", f.ns); !strings.Contains(out, testenv.FluxShort("v1@"+digest)) || !strings.Contains(out, "True") {
		t.Fatalf("flux get sources oci does not show the ready revision:\n%s", out)
	}
	next := f.push(t, "app:v1", map[string]string{"apps/config.yaml": "changed\n"})
	out := testenv.Flux(t, f.env, "reconcile", "source", "oci", "app", "-n", f.ns)
	if !strings.Contains(out, testenv.FluxShort("v1@"+next)) {
		t.Fatalf("flux reconcile source oci does not report the new revision %s:\n%s", next, out)
	}
	f.waitRevision(t, "app", "v1@"+next)
}

// A semver range picks the highest tag in it, among those the filter
// keeps; a digest reference is its own revision.
func TestSemverAndDigestReferences(t *testing.T) {
	f := setup(t, nil)
	for _, tag := range []string{"1.0.0", "1.2.0", "1.3.0-rc.1", "2.0.0"} {
		f.push(t, "app:"+tag, map[string]string{"v.yaml": tag})
	}
	d120 := f.push(t, "app:1.2.0", map[string]string{"v.yaml": "1.2.0"})
	f.create(t, "ranged", "app", func(o *sourcev1.OCIRepository) {
		o.Spec.Reference = &sourcev1.OCIRepositoryRef{SemVer: ">=1.0.0 <2.0.0"}
	})
	f.waitRevision(t, "ranged", "1.2.0@"+d120)
	d100 := f.push(t, "app:1.0.0", map[string]string{"v.yaml": "1.0.0"})
	f.create(t, "filtered", "app", func(o *sourcev1.OCIRepository) {
		o.Spec.Reference = &sourcev1.OCIRepositoryRef{SemVer: ">=1.0.0 <2.0.0", SemverFilter: "^1\\.0\\."}
	})
	f.waitRevision(t, "filtered", "1.0.0@"+d100)
	f.create(t, "pinned", "app", func(o *sourcev1.OCIRepository) {
		o.Spec.Reference = &sourcev1.OCIRepositoryRef{Digest: d100, Tag: "2.0.0"}
	})
	obj := f.waitRevision(t, "pinned", d100)
	if got := f.artifactFiles(t, obj)["v.yaml"]; got != "1.0.0" {
		t.Fatalf("the digest's artifact holds %q", got)
	}
	f.create(t, "none", "app", func(o *sourcev1.OCIRepository) {
		o.Spec.Reference = &sourcev1.OCIRepositoryRef{SemVer: ">=3.0.0"}
	})
	f.waitFailure(t, "none", sourcev1.OCIPullFailedReason, "no tag of")
}

// What strata does not serve is refused by name, and a layer that is not
// there says which media type was asked for; nothing is stored.
func TestRefusalsNameTheField(t *testing.T) {
	f := setup(t, nil)
	f.push(t, "app:v1", manifests)
	f.create(t, "copy", "app", func(o *sourcev1.OCIRepository) {
		o.Spec.LayerSelector = &sourcev1.OCILayerSelector{MediaType: "application/vnd.cncf.flux.content.v1.tar+gzip", Operation: "copy"}
	})
	f.create(t, "aws", "app", func(o *sourcev1.OCIRepository) { o.Spec.Provider = "aws" })
	f.create(t, "helm", "app", func(o *sourcev1.OCIRepository) {
		o.Spec.Reference = &sourcev1.OCIRepositoryRef{Tag: "v1"}
		o.Spec.LayerSelector = &sourcev1.OCILayerSelector{MediaType: "application/vnd.cncf.helm.chart.content.v1.tar+gzip"}
	})
	for name, want := range map[string]string{"copy": "operation 'copy'", "aws": "spec.provider 'aws'"} {
		if obj := f.waitFailure(t, name, status.UnsupportedFieldReason, want); obj.Status.Artifact != nil {
			t.Fatalf("%s stored an artifact", name)
		}
	}
	f.waitFailure(t, "helm", sourcev1.OCILayerOperationFailedReason, "no layer of media type 'application/vnd.cncf.helm.chart.content.v1.tar+gzip'")
}

// Credentials come from a dockerconfigjson Secret, and only its entry for
// the repository's own registry is sent: a Secret for another registry
// opens nothing, and the registry refuses a pull without them.
func TestCredentialsOpenOnlyTheirRegistry(t *testing.T) {
	const user, pass = "flux", "s3cret"
	f := setup(t, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if u, p, ok := r.BasicAuth(); !ok || u != user || p != pass {
				w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
			next.ServeHTTP(w, r)
		})
	})
	digest := f.push(t, "private:v1", manifests, "--creds", user+":"+pass)
	dockerSecret := func(name, host string) {
		auth := base64.StdEncoding.EncodeToString([]byte(user + ":" + pass))
		cfg := fmt.Sprintf(`{"auths":{%q:{"auth":%q}}}`, host, auth)
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns}, Type: corev1.SecretTypeDockerConfigJson,
			Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(cfg)}}
		if err := f.env.Client.Create(context.Background(), s); err != nil {
			t.Fatal(err)
		}
	}
	dockerSecret("right", "http://"+f.host+"/v2/")
	dockerSecret("elsewhere", "registry.example.com")
	withSecret := func(name string) func(*sourcev1.OCIRepository) {
		return func(o *sourcev1.OCIRepository) {
			o.Spec.Reference = &sourcev1.OCIRepositoryRef{Tag: "v1"}
			if name != "" {
				o.Spec.SecretRef = &metaRef{Name: name}
			}
		}
	}
	f.create(t, "right", "private", withSecret("right"))
	f.create(t, "elsewhere", "private", withSecret("elsewhere"))
	f.create(t, "anonymous", "private", withSecret(""))
	f.waitRevision(t, "right", "v1@"+digest)
	f.waitFailure(t, "elsewhere", sourcev1.AuthenticationFailedReason, "holds no credentials for the registry "+f.host)
	f.waitFailure(t, "anonymous", sourcev1.OCIPullFailedReason, "name a kubernetes.io/dockerconfigjson Secret for it in spec.secretRef")
}

// spec.verify checks a signature the real cosign made with a key: the
// signed artifact is stored and SourceVerified; an unsigned one, or one
// checked against another key, stores nothing.
func TestCosignSignaturesAreVerified(t *testing.T) {
	cosign := filepath.Join(testenv.RepoRoot(), "bin", "cosign")
	if _, err := os.Stat(cosign); err != nil {
		testenv.Unavailable(t, "bin/cosign is not built: run hack/tools.sh cosign")
	}
	f := setup(t, nil)
	keys := t.TempDir()
	pub := map[string][]byte{}
	for _, name := range []string{"signer", "other"} {
		dir := filepath.Join(keys, name)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(cosign, "generate-key-pair")
		cmd.Dir, cmd.Env = dir, append(os.Environ(), "COSIGN_PASSWORD=")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("cosign generate-key-pair: %v\n%s", err, out)
		}
		data, err := os.ReadFile(filepath.Join(dir, "cosign.pub"))
		if err != nil {
			t.Fatal(err)
		}
		pub[name] = data
	}
	signed := f.push(t, "app:signed", manifests)
	f.push(t, "app:unsigned", manifests, "--annotations", "unsigned=yes")
	cmd := exec.Command(cosign, "sign", "--key", filepath.Join(keys, "signer", "cosign.key"), "--tlog-upload=false",
		"--allow-http-registry", "--allow-insecure-registry", "--yes", f.host+"/app@"+signed)
	cmd.Env = append(os.Environ(), "COSIGN_PASSWORD=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cosign sign: %v\n%s", err, out)
	}
	for name, data := range map[string][]byte{"signer-keys": pub["signer"], "other-keys": pub["other"]} {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns}, Data: map[string][]byte{"cosign.pub": data}}
		if err := f.env.Client.Create(context.Background(), s); err != nil {
			t.Fatal(err)
		}
	}
	verified := func(tag, secret string) func(*sourcev1.OCIRepository) {
		return func(o *sourcev1.OCIRepository) {
			o.Spec.Reference = &sourcev1.OCIRepositoryRef{Tag: tag}
			o.Spec.Verify = &sourcev1.OCIRepositoryVerification{Provider: "cosign", SecretRef: &metaRef{Name: secret}}
		}
	}
	f.create(t, "signed", "app", verified("signed", "signer-keys"))
	f.create(t, "unsigned", "app", verified("unsigned", "signer-keys"))
	f.create(t, "wrong-key", "app", verified("signed", "other-keys"))
	obj := f.waitRevision(t, "signed", "signed@"+signed)
	if c := findCondition(obj, sourcev1.SourceVerifiedCondition); c == nil || c.Status != metav1.ConditionTrue {
		t.Fatalf("SourceVerified is %+v", c)
	}
	for name, want := range map[string]string{"unsigned": "no cosign signature", "wrong-key": "does not match the key"} {
		if obj := f.waitFailure(t, name, sourcev1.VerificationError, want); obj.Status.Artifact != nil {
			t.Fatalf("%s stored an artifact", name)
		}
	}
}
