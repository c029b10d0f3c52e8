// Package charts holds the tests of the Helm chart charts/strata.
package charts

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-gitops/strata/internal/testing/testenv"
	"github.com/strata-gitops/strata/storage/agent/volumeapi"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// required are the values a release must set.
var required = []string{"image.repository=images.example/strata", "csiSidecars.registry=images.example"}

// everything turns every part of the chart on.
var everything = append(required, "btrfsHost.enabled=true", "btrfsHost.nodeSelector.strata\\.dev/btrfs-host=true",
	"btrfsHost.tenantsSecret=tenants", "btrfsHost.tls.secretName=agent-tls", "controller.persistence.existingClaim=strata-data",
	"agent.replication.enabled=true", "agent.images.enabled=true", "agent.images.volumeGroup=vms", "agent.images.credentialsSecret=buckets")

// TestEveryObjectIsValid applies the whole chart to a real API server with
// strict field validation: a misspelt or misplaced field fails.
func TestEveryObjectIsValid(t *testing.T) {
	env := testenv.Get(t)
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "chart-valid"}}
	if err := env.Client.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	objects := testenv.RenderChartServing(t, "valid", ns.Name, []string{mutatingPolicies}, everything...)
	kinds := map[string]int{}
	for _, o := range objects {
		kinds[o.GetKind()]++
	}
	want := map[string]int{"Deployment": 2, "DaemonSet": 2, "CSIDriver": 1, "ServiceAccount": 5, "Service": 3, "MutatingAdmissionPolicy": 1}
	for kind, n := range want {
		if kinds[kind] != n {
			t.Errorf("the chart renders %d %s, want %d (all: %v)", kinds[kind], kind, n, kinds)
		}
	}
	if err := testenv.ApplyStrictly(ctx, env.Client, objects); err != nil {
		t.Fatal(err)
	}
}

// TestKubeletFindsTheNodeService checks that the socket the registrar
// tells kubelet about is the one the CSI node service listens on, seen
// from the host.
func TestKubeletFindsTheNodeService(t *testing.T) {
	for _, kubelet := range []string{"/var/lib/kubelet", "/var/snap/microk8s/common/var/lib/kubelet"} {
		agent := find(t, testenv.RenderChart(t, "k", "strata-system", append(required, "csi.kubeletDir="+kubelet)...), "DaemonSet", "k-agent")
		pod := agent.Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
		hostPaths := map[string]string{}
		for _, v := range pod["volumes"].([]any) {
			v := v.(map[string]any)
			if hp, ok := v["hostPath"].(map[string]any); ok {
				hostPaths[v["name"].(string)] = hp["path"].(string)
			}
		}
		mounts := map[string]map[string]string{} // container → mount path → volume
		args := map[string][]string{}
		for _, c := range pod["containers"].([]any) {
			c := c.(map[string]any)
			name := c["name"].(string)
			mounts[name] = map[string]string{}
			for _, m := range c["volumeMounts"].([]any) {
				m := m.(map[string]any)
				mounts[name][m["mountPath"].(string)] = m["name"].(string)
			}
			for _, a := range c["args"].([]any) {
				args[name] = append(args[name], a.(string))
			}
		}
		socket := strings.TrimPrefix(flag(args["csi-node"], "--endpoint"), "unix://")
		onHost := hostPaths[mounts["csi-node"]["/csi"]] + strings.TrimPrefix(socket, "/csi")
		if got := flag(args["csi-node"], "--kubelet-endpoint"); got != onHost {
			t.Errorf("kubelet dir %s: the node service registers %s, and listens at %s on the host", kubelet, got, onHost)
		}
		if !strings.HasPrefix(onHost, kubelet+"/plugins/") {
			t.Errorf("kubelet dir %s: the node socket %s is not under kubelet's plugins directory", kubelet, onHost)
		}
		registration := flag(args["csi-node"], "--registration-dir")
		if hostPaths[mounts["csi-node"][registration]] != kubelet+"/plugins_registry" {
			t.Errorf("kubelet dir %s: registration directory %v", kubelet, hostPaths)
		}
		// On the host network, metrics on every address would be open to
		// the node's whole network.
		if got := flag(args["agent"], "--metrics-bind-address"); !strings.HasPrefix(got, "127.0.0.1:") {
			t.Errorf("the agent's metrics bind to %q, want localhost by default", got)
		}
	}
}

// With the LVM mover on, the controller calls the agents on the port they
// listen on, with its own service account's tokens, one per node's
// audience, which the agents take from it alone, trusting the CA
// that issues their certificates. The tenants Secret the agents read
// (for image jobs) opens no pair route.
func TestTheControllerReachesTheAgentsPairAPI(t *testing.T) {
	objects := testenv.RenderChart(t, "r", "strata-system", append(required, "agent.replication.enabled=true", "agent.replication.port=9421")...)
	agent := containerArgs(t, find(t, objects, "DaemonSet", "r-agent"), "agent")
	controller := containerArgs(t, find(t, objects, "Deployment", "r-controller"), "controller")
	if got := flag(agent, "--pairs-listen"); got != ":9421" || flag(controller, "--lvm-pairs-port") != "9421" {
		t.Errorf("the agents listen on %q, the controller calls port %q", got, flag(controller, "--lvm-pairs-port"))
	}
	if flag(controller, "--lvm-pairs-tokens-secret") != "" || flag(controller, "--lvm-pairs-service-account") != "strata-system/r-controller" {
		t.Errorf("the controller calls the agents with %q; want its own service account's tokens", controller)
	}
	if got := flag(agent, "--pairs-controller"); got != "system:serviceaccount:strata-system:r-controller" {
		t.Errorf("the agents' pair routes take %q; want the controller's service account", got)
	}
	// No token for every agent sits in a file of the controller's.
	deployment := find(t, objects, "Deployment", "r-controller")
	volumes, _, _ := unstructured.NestedSlice(deployment.Object, "spec", "template", "spec", "volumes")
	if strings.Contains(fmt.Sprint(volumes), "audience:strata-agent") {
		t.Errorf("the controller's volumes %v hold a token for every agent", volumes)
	}
	secret := find(t, objects, "Secret", strings.TrimPrefix(flag(agent, "--tenants-secret"), "strata-system/"))
	data, _, _ := unstructured.NestedStringMap(secret.Object, "data")
	if len(data) != 1 || len(data["strata"]) < 40 {
		t.Errorf("the tenants Secret holds %v; want one tenant with a long random token", data)
	}
	ca := find(t, objects, "Secret", strings.TrimPrefix(flag(controller, "--lvm-pairs-ca-secret"), "strata-system/"))
	if _, ok, _ := unstructured.NestedString(ca.Object, "data", "ca.crt"); !ok || flag(agent, "--volume-api-tls-ca-cert") == "" {
		t.Error("the agents do not serve TLS from the CA the controller trusts")
	}
	agentVolumes, _, _ := unstructured.NestedSlice(find(t, objects, "DaemonSet", "r-agent").Object, "spec", "template", "spec", "volumes")
	if strings.Contains(fmt.Sprint(agentVolumes), "secretName:r-agent-ca]") || !slices.Contains(agent, "--volume-api-tls-request") {
		t.Errorf("the agents hold the CA's key, or make their own certificates: %v", agentVolumes)
	}
	find(t, objects, "Role", "r-agent-pairs")
	if hostPID, _, _ := unstructured.NestedBool(find(t, objects, "DaemonSet", "r-agent").Object, "spec", "template", "spec", "hostPID"); !hostPID {
		t.Error("the agent does not see the node's processes, which a self-fence kills")
	}
}

// containerArgs are the args of a workload's container.
func containerArgs(t *testing.T, workload *unstructured.Unstructured, container string) []string {
	t.Helper()
	containers, _, _ := unstructured.NestedSlice(workload.Object, "spec", "template", "spec", "containers")
	for _, c := range containers {
		c := c.(map[string]any)
		if c["name"] == container {
			args, _, _ := unstructured.NestedStringSlice(c, "args")
			return args
		}
	}
	t.Fatalf("%s %s has no container %s", workload.GetKind(), workload.GetName(), container)
	return nil
}

func flag(args []string, name string) string {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v
		}
	}
	return ""
}

func find(t *testing.T, objects []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objects {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	t.Fatalf("the chart renders no %s %s", kind, name)
	return nil
}

// TestMissingValuesAreNamed checks that a release without a required
// value fails to render, and the error names the value.
func TestMissingValuesAreNamed(t *testing.T) {
	for _, c := range []struct {
		set  []string
		want string
	}{
		{nil, "image.repository is required"},
		{required[:1], "csiSidecars.registry is required"},
		{append(required, "btrfsHost.enabled=true"), "btrfsHost.nodeSelector is required"},
		{append(required, "agent.images.enabled=true", "agent.images.volumeGroup=vms"), "agent.images.enabled needs agent.replication.enabled"},
	} {
		args := []string{"template", "m", testenv.RepoRoot() + "/charts/strata"}
		for _, s := range c.set {
			args = append(args, "--set", s)
		}
		_, err := testenv.Helm(t, args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("helm template --set %v: %v; want an error saying %q", c.set, err, c.want)
		}
	}
}

// applyAccessControl makes namespace ns and applies there what of a
// release of the chart controls access: its admission policies, service
// accounts and roles, as a real API server enforces them.
func applyAccessControl(t *testing.T, env *testenv.Env, release, name string) *corev1.Namespace {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := env.Client.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	var policy []*unstructured.Unstructured
	for _, o := range testenv.RenderChart(t, release, ns.Name, required...) {
		switch o.GetKind() {
		case "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding":
			policy = append(policy, o)
		}
	}
	if err := testenv.ApplyStrictly(context.Background(), env.Client, policy); err != nil {
		t.Fatal(err)
	}
	return ns
}

// The agent's token may change only its own Node's capacity annotations:
// the chart's admission policy, enforced by a real API server, refuses
// another node, a label and any other annotation.
func TestTheAgentChangesOnlyItsOwnNodesCapacity(t *testing.T) {
	env, ctx := testenv.Get(t), context.Background()
	ns := applyAccessControl(t, env, "np", "chart-node-policy")
	for _, n := range []string{"np-a", "np-b"} {
		if err := env.Client.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}); err != nil {
			t.Fatal(err)
		}
	}
	cfg := testenv.ServiceAccountConfig(env.Config, ns.Name, "np-agent")
	cfg.Impersonate.Extra = map[string][]string{"authentication.kubernetes.io/node-name": {"np-a"}}
	agent, err := client.New(cfg, client.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	patch := func(node, body string) error {
		return agent.Patch(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, client.RawPatch(types.MergePatchType, []byte(body)))
	}
	// The API server takes up a new policy a moment after it is created.
	testenv.Eventually(t, 30*time.Second, func() error {
		if err := patch("np-b", `{"metadata":{"annotations":{"capacity.strata.dev/fast":"1"}}}`); err == nil || !strings.Contains(err.Error(), "only its own Node") {
			return fmt.Errorf("the agent of np-a annotating np-b: %v, want a refusal", err)
		}
		return nil
	})
	if err := patch("np-a", `{"metadata":{"annotations":{"capacity.strata.dev/fast":"1073741824"}}}`); err != nil {
		t.Fatalf("the agent writing its own node's capacity: %v", err)
	}
	for what, body := range map[string]string{
		"a label":            `{"metadata":{"labels":{"node-role.kubernetes.io/control-plane":""}}}`,
		"another annotation": `{"metadata":{"annotations":{"example.com/owner":"me"}}}`,
		"a taint":            `{"spec":{"taints":[{"key":"x","effect":"NoSchedule"}]}}`,
	} {
		if err := patch("np-a", body); err == nil {
			t.Errorf("the agent set %s on its node", what)
		}
	}
}

// An agent's token may write only its own node's Lease: the chart's
// Role keeps it to the release's namespace, and its admission policy,
// enforced by a real API server, to strata-node-{its node}. Another
// node's Lease, created or renewed with an old RenewTime, would start a
// failover of a node whose agent goes on writing.
func TestTheAgentWritesOnlyItsOwnNodesLease(t *testing.T) {
	env, ctx := testenv.Get(t), context.Background()
	ns := applyAccessControl(t, env, "lp", "chart-lease-policy")
	cfg := testenv.ServiceAccountConfig(env.Config, ns.Name, "lp-agent")
	cfg.Impersonate.Extra = map[string][]string{"authentication.kubernetes.io/node-name": {"lp-a"}}
	agent, err := client.New(cfg, client.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	leaseOf := func(namespace, name string) *coordinationv1.Lease {
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
			Spec: coordinationv1.LeaseSpec{RenewTime: &metav1.MicroTime{Time: time.Now().Add(-time.Hour)}}}
	}
	// The API server takes up a new policy a moment after it is created.
	testenv.Eventually(t, 30*time.Second, func() error {
		err := agent.Create(ctx, leaseOf(ns.Name, "strata-node-lp-b"))
		if err == nil {
			_ = env.Client.Delete(ctx, leaseOf(ns.Name, "strata-node-lp-b"))
		}
		if err == nil || !strings.Contains(err.Error(), "only its own node's Lease") {
			return fmt.Errorf("the agent of lp-a creating lp-b's Lease: %v, want a refusal", err)
		}
		return nil
	})
	if err := agent.Create(ctx, leaseOf(ns.Name, "strata-node-lp-a")); err != nil {
		t.Fatalf("the agent creating its own node's Lease: %v", err)
	}
	if err := env.Client.Create(ctx, leaseOf(ns.Name, "strata-node-lp-b")); err != nil {
		t.Fatal(err)
	}
	renew := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"renewTime":"2020-01-01T00:00:00.000000Z"}}`))
	if err := agent.Patch(ctx, leaseOf(ns.Name, "strata-node-lp-b"), renew); err == nil {
		t.Error("the agent of lp-a renewed lp-b's Lease")
	}
	if err := agent.Patch(ctx, leaseOf(ns.Name, "strata-node-lp-a"), renew); err != nil {
		t.Errorf("the agent renewing its own node's Lease: %v", err)
	}
	if err := agent.Create(ctx, leaseOf("kube-system", "strata-node-lp-a")); err == nil {
		t.Error("the agent created a Lease outside the release's namespace")
	}
}

// The CSI controller elects its sidecars' leaders with Leases in the
// release namespace and nowhere else: it cannot write a kubelet's Lease,
// which the fence check trusts, nor forge a strata-node-* Lease, which
// only the agents write (the node-leases policy, enforced by a real API
// server).
func TestOnlyTheAgentsWriteNodeLeases(t *testing.T) {
	env, ctx := testenv.Get(t), context.Background()
	ns := applyAccessControl(t, env, "ll", "chart-node-leases")
	csi, err := client.New(testenv.ServiceAccountConfig(env.Config, ns.Name, "ll-csi-controller"), client.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	lease := func(namespace, name string) *coordinationv1.Lease {
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
			Spec: coordinationv1.LeaseSpec{RenewTime: &metav1.MicroTime{Time: time.Now().Add(-time.Hour)}}}
	}
	// The API server takes up a new policy a moment after it is created.
	testenv.Eventually(t, 30*time.Second, func() error {
		err := csi.Create(ctx, lease(ns.Name, "strata-node-ll-a"))
		if err == nil {
			_ = env.Client.Delete(ctx, lease(ns.Name, "strata-node-ll-a"))
		}
		if err == nil || !strings.Contains(err.Error(), "only strata's node agents write the node Lease strata-node-ll-a") {
			return fmt.Errorf("the CSI controller creating a node's Lease: %v, want a refusal", err)
		}
		return nil
	})
	if err := env.Client.Create(ctx, lease(ns.Name, "strata-node-ll-b")); err != nil {
		t.Fatal(err)
	}
	renew := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"renewTime":"2020-01-01T00:00:00.000000Z"}}`))
	if err := csi.Patch(ctx, lease(ns.Name, "strata-node-ll-b"), renew); err == nil {
		t.Error("the CSI controller renewed a node's Lease")
	}
	if err := csi.Create(ctx, lease("kube-node-lease", "ll-a")); !apierrors.IsForbidden(err) {
		t.Errorf("the CSI controller creating a kubelet's Lease: %v, want forbidden", err)
	}
	if err := csi.Create(ctx, lease(ns.Name, "external-attacher-leader-strata-dev")); err != nil {
		t.Errorf("the CSI controller's sidecar electing its leader: %v", err)
	}
}

// By default the btrfs volume API serves TLS: the chart makes a CA, the
// storage hosts' agents issue themselves certificates from it, and a
// StorageClass trusts its public half. The API listens on the node's own
// address only.
func TestTheBtrfsVolumeAPIServesTLSByDefault(t *testing.T) {
	objects := testenv.RenderChart(t, "tls", "strata-system", append(required, "btrfsHost.enabled=true",
		"btrfsHost.nodeSelector.strata\\.dev/btrfs-host=true")...)
	ca := find(t, objects, "Secret", "tls-agent-ca")
	public := find(t, objects, "Secret", "tls-agent-ca-public")
	data := func(s *unstructured.Unstructured, key string) []byte {
		v, _, _ := unstructured.NestedString(s.Object, "data", key)
		out, err := base64.StdEncoding.DecodeString(v)
		if err != nil || len(out) == 0 {
			t.Fatalf("Secret %s has no %s: %v", s.GetName(), key, err)
		}
		return out
	}
	if _, err := volumeapi.Issue(data(ca, "tls.crt"), data(ca, "tls.key"), []string{"host"}, nil, time.Hour); err != nil {
		t.Fatalf("the chart's CA cannot issue the agent's certificate: %v", err)
	}
	if !bytes.Equal(data(public, "ca.crt"), data(ca, "tls.crt")) {
		t.Fatal("the public CA Secret is not the CA's certificate")
	}
	host := find(t, objects, "DaemonSet", "tls-btrfs-host")
	containers, _, _ := unstructured.NestedSlice(host.Object, "spec", "template", "spec", "containers")
	var args []string
	for _, a := range containers[0].(map[string]any)["args"].([]any) {
		args = append(args, a.(string))
	}
	// The agent trusts the CA and asks the controller for its certificate:
	// it never holds the CA's key, which would let one node make
	// certificates for every other.
	if flag(args, "--volume-api-tls-ca-cert") == "" || !slices.Contains(args, "--volume-api-tls-request") || flag(args, "--volume-api-tls-ca-key") != "" {
		t.Errorf("the btrfs host's agent is not given the CA and a signed certificate: %v", args)
	}
	volumes, _, _ := unstructured.NestedSlice(host.Object, "spec", "template", "spec", "volumes")
	if strings.Contains(fmt.Sprint(volumes), "secretName:tls-agent-ca]") {
		t.Errorf("the btrfs host mounts the CA's key: %v", volumes)
	}
	controller := containerArgs(t, find(t, objects, "Deployment", "tls-controller"), "controller")
	if flag(controller, "--agent-ca-secret") != "strata-system/tls-agent-ca" ||
		!strings.Contains(flag(controller, "--agent-ca-agents"), "system:serviceaccount:strata-system:tls-btrfs-host") {
		t.Errorf("the controller does not sign the agents' certificates: %v", controller)
	}
	if got := flag(args, "--volume-api-listen"); got != "$(HOST_IP):8420" {
		t.Errorf("the volume API listens on %q, want the node's address only", got)
	}
}

func TestImageJobsAreConfigured(t *testing.T) {
	objects := testenv.RenderChart(t, "img", "strata-system", append(required, "btrfsHost.enabled=true",
		"btrfsHost.nodeSelector.strata\\.dev/btrfs-host=true", "btrfsHost.images.enabled=true",
		"btrfsHost.images.cacheBytes=53687091200", "btrfsHost.images.credentialsSecret=minio-creds",
		"btrfsHost.images.endpoints={http://minio.lan:9000,https://s3.lan}")...)
	host := find(t, objects, "DaemonSet", "img-btrfs-host")
	containers, _, _ := unstructured.NestedSlice(host.Object, "spec", "template", "spec", "containers")
	var args []string
	for _, a := range containers[0].(map[string]any)["args"].([]any) {
		args = append(args, a.(string))
	}
	for name, want := range map[string]string{"--image-dir": "/var/lib/strata/images", "--image-cache-bytes": "53687091200",
		"--image-jobs": "2", "--image-credentials-secret": "strata-system/minio-creds",
		"--image-endpoints": "http://minio.lan:9000,https://s3.lan"} {
		if got := flag(args, name); got != want {
			t.Errorf("%s = %q, want %q (args %v)", name, got, want, args)
		}
	}
	role := find(t, objects, "Role", "img-btrfs-host")
	rules, _, _ := unstructured.NestedSlice(role.Object, "rules")
	readable := false
	for _, r := range rules {
		names, _ := r.(map[string]any)["resourceNames"].([]any)
		for _, n := range names {
			readable = readable || n == "minio-creds"
		}
	}
	if !readable {
		t.Errorf("the btrfs host may not read the image credentials Secret: %v", rules)
	}
}

// By default the CSI controller's role reads no Secret: the controller
// grants it exactly the Secrets strata's classes name. With
// csi.secretAccess=cluster, for classes that name theirs by a template,
// it reads every Secret, and the controller grants nothing.
func TestTheCSIControllerReadsOnlyItsClassesSecretsByDefault(t *testing.T) {
	for _, c := range []struct {
		access       string
		readsSecrets bool
	}{{"classes", false}, {"cluster", true}} {
		objects := testenv.RenderChart(t, "s", "strata-system", append(required, "csi.secretAccess="+c.access)...)
		role := find(t, objects, "ClusterRole", "s-csi-controller")
		rules, _, _ := unstructured.NestedSlice(role.Object, "rules")
		if got := strings.Contains(fmt.Sprint(rules), "resources:[secrets]"); got != c.readsSecrets {
			t.Errorf("secretAccess %s: the CSI controller's ClusterRole reads Secrets: %v, want %v (%v)", c.access, got, c.readsSecrets, rules)
		}
		controller := containerArgs(t, find(t, objects, "Deployment", "s-controller"), "controller")
		if got := flag(controller, "--csi-secrets-for"); (got == "") != c.readsSecrets {
			t.Errorf("secretAccess %s: --csi-secrets-for %q", c.access, got)
		}
	}
}
