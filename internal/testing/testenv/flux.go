package testenv

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// FluxCLI is Flux's own CLI, built by `hack/tools.sh flux-cli`.
func FluxCLI(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(RepoRoot(), "bin", "flux-cli")
	if _, err := os.Stat(bin); err != nil {
		Unavailable(t, "bin/flux-cli is not built: run hack/tools.sh flux-cli")
	}
	return bin
}

// FluxPushArtifact writes files to a directory and pushes it with `flux
// push artifact` to ref (host:port/repository:tag, plain HTTP), as users
// ship manifests; it returns the artifact's digest. extra are more flags.
func FluxPushArtifact(t testing.TB, ref string, files map[string]string, extra ...string) string {
	t.Helper()
	dir := t.TempDir()
	if err := WriteTree(dir, files); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"push", "artifact", "oci://" + ref, "--path", dir,
		"--source", "https://example.com/infra.git", "--revision", "main@sha1:0123456789abcdef0123456789abcdef01234567",
		"--insecure-registry", "--output", "json"}, extra...)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, FluxCLI(t), args...).Output()
	if err != nil {
		stderr := ""
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("flux %s: %v\n%s", strings.Join(args, " "), err, stderr)
	}
	var pushed struct {
		Digest string `json:"digest"`
	}
	if err := json.Unmarshal(out, &pushed); err != nil || pushed.Digest == "" {
		t.Fatalf("flux push artifact printed no digest (%v):\n%s", err, out)
	}
	return pushed.Digest
}

// WriteTree writes files (slash-separated path to content) under dir.
func WriteTree(dir string, files map[string]string) error {
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// FluxSourceController runs Flux's real source-controller (unpacked from
// ../shared/flux into bin/flux by `hack/tools.sh flux-controllers`)
// against the test's API server, serving artifacts at the returned
// host:port. It reconciles only objects labelled selector, so that
// strata's own reconcilers and it never share one.
func FluxSourceController(t testing.TB, env *Env, selector string) string {
	t.Helper()
	addr := FreeAddr(t)
	storage := filepath.Join(t.TempDir(), "storage")
	if err := os.Mkdir(storage, 0o755); err != nil {
		t.Fatal(err)
	}
	runFluxController(t, env, "source-controller", "--storage-path", storage, "--storage-addr", addr, "--storage-adv-addr", addr,
		"--watch-label-selector", selector)
	return addr
}

// FluxNotificationController runs Flux's real notification-controller
// against the test's API server and returns the URL its event endpoint
// listens on (what Flux's controllers take as --events-addr). It
// reconciles every Alert and Provider of the cluster.
func FluxNotificationController(t testing.TB, env *Env) string {
	t.Helper()
	addr := FreeAddr(t)
	runFluxController(t, env, "notification-controller", "--events-addr", addr, "--receiverAddr", FreeAddr(t))
	return "http://" + addr + "/"
}

// FluxKustomizeControllerUser is who Flux's kustomize-controller is to
// the API server, as Flux installs it.
const FluxKustomizeControllerUser = "system:serviceaccount:flux-system:kustomize-controller"

// FluxKustomizeController runs Flux's real kustomize-controller (built
// from the module proxy into bin/flux by hack/flux.sh) against the test's
// API server, as its service account in flux-system (an administrator
// impersonating it), so that admission sees its requests as Flux's.
func FluxKustomizeController(t testing.TB, env *Env) {
	t.Helper()
	FluxKustomizeControllerRights(t, env)
	kubeconfig := env.KubeconfigFileAs(t, FluxKustomizeControllerUser, "system:serviceaccounts", "system:serviceaccounts:flux-system")
	runFluxControllerAs(t, env, kubeconfig, "kustomize-controller", "--events-addr", "")
}

// FluxKustomizeControllerRights binds Flux's kustomize-controller's
// service account to cluster-admin, as Flux's installation does.
func FluxKustomizeControllerRights(t testing.TB, env *Env) {
	t.Helper()
	if err := env.Client.Create(context.Background(), FluxKustomizeControllerBinding()); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// FluxKustomizeControllerBinding binds Flux's kustomize-controller's
// service account to cluster-admin, as Flux's installation does.
func FluxKustomizeControllerBinding() *rbacv1.ClusterRoleBinding {
	return &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "flux-kustomize-controller"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: "flux-system", Name: "kustomize-controller"}}}
}

// runFluxController runs one of Flux's controllers from bin/flux until
// the test ends, its CRDs installed first, its log shown if the test
// failed.
func runFluxController(t testing.TB, env *Env, name string, args ...string) {
	t.Helper()
	runFluxControllerAs(t, env, env.KubeconfigFile(t), name, args...)
}

// runFluxControllerAs is runFluxController with the kubeconfig given.
func runFluxControllerAs(t testing.TB, env *Env, kubeconfig, name string, args ...string) {
	t.Helper()
	bin := filepath.Join(RepoRoot(), "bin", "flux", name)
	if _, err := os.Stat(bin); err != nil {
		Unavailable(t, "bin/flux/"+name+" is missing: run hack/tools.sh flux-controllers (and hack/flux.sh for kustomize-controller)")
	}
	installFluxCRDs(t, env)
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, append([]string{"--enable-leader-election=false", "--metrics-addr", "0",
		"--health-addr", FreeAddr(t)}, args...)...)
	cmd.Env = append(os.Environ(), "RUNTIME_NAMESPACE=flux-system", "KUBECONFIG="+kubeconfig)
	logFile, err := os.Create(filepath.Join(t.TempDir(), name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
		logFile.Close()
		if t.Failed() {
			data, _ := os.ReadFile(logFile.Name())
			t.Logf("%s log:\n%s", name, data)
		}
	})
}

// installFluxCRDs installs the CRDs of bin/flux/crds (copied there with
// the controllers) that the API server lacks (HelmChart, HelmRepository,
// Alert, Provider, HelmRelease): Flux's controllers watch them.
func installFluxCRDs(t testing.TB, env *Env) {
	t.Helper()
	entries, _ := filepath.Glob(filepath.Join(FluxCRDDir(t), "*.yaml"))
	for _, p := range entries {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range strings.Split(string(data), "\n---") {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := yaml.Unmarshal([]byte(doc), crd); err != nil || crd.Name == "" {
				continue
			}
			if err := env.Client.Create(context.Background(), crd); err != nil && !strings.Contains(err.Error(), "already exists") {
				t.Fatal(err)
			}
		}
	}
}

// FluxCRDDir is the directory of Flux's own CRDs, as Flux's controllers
// v1.9 install them (bin/flux/crds, which hack/tools.sh flux-controllers
// fills).
func FluxCRDDir(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(RepoRoot(), "bin", "flux", "crds")
	if entries, err := filepath.Glob(filepath.Join(dir, "*.yaml")); err != nil || len(entries) == 0 {
		Unavailable(t, "Flux's CRDs are not in "+dir+": run hack/tools.sh flux-controllers")
	}
	return dir
}

// Flux runs Flux's CLI against the test's API server and returns what it
// printed; a failure fails the test.
func Flux(t testing.TB, env *Env, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, FluxCLI(t), append(args, "--kubeconfig", env.KubeconfigFile(t))...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("flux %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// FluxShort is a revision as Flux's CLI prints it: a digest cut to its
// first eight hex digits.
func FluxShort(revision string) string {
	i := strings.LastIndex(revision, "sha256:")
	if i < 0 || len(revision) < i+len("sha256:")+8 {
		return revision
	}
	return revision[:i+len("sha256:")+8]
}
