package volumeusage_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/strata-gitops/strata/internal/testing/testenv"
	"github.com/strata-gitops/strata/storage/volumeusage"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// kubelet answers /stats/summary as a kubelet does, with what summary
// holds, and remembers the bearer it was sent.
type kubelet struct {
	summary atomic.Value // string
	bearer  atomic.Value // string
	srv     *httptest.Server
}

func newKubelet(t *testing.T) *kubelet {
	k := &kubelet{}
	k.summary.Store(`{"pods":[]}`)
	k.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k.bearer.Store(r.Header.Get("Authorization"))
		if r.URL.Path != "/stats/summary" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(k.summary.Load().(string)))
	}))
	t.Cleanup(k.srv.Close)
	return k
}

// node makes a Node whose kubelet is k.
func node(t *testing.T, env *testenv.Env, name string, k *kubelet) {
	t.Helper()
	ctx := context.Background()
	host, port, _ := net.SplitHostPort(k.srv.Listener.Addr().String())
	p, _ := strconv.Atoi(port)
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := env.Client.Create(ctx, n); err != nil {
		t.Fatal(err)
	}
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: host}}
	n.Status.DaemonEndpoints.KubeletEndpoint.Port = int32(p)
	if err := env.Client.Status().Update(ctx, n); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(ctx, n) })
}

// pod makes a pod placed on node mounting claim.
func pod(t *testing.T, env *testenv.Env, ns, name, node, claim string) {
	t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.PodSpec{NodeName: node,
		Containers: []corev1.Container{{Name: "app", Image: "app"}},
		Volumes:    []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}}}}
	if err := env.Client.Create(context.Background(), p); err != nil {
		t.Fatal(err)
	}
}

// summaryOf is a kubelet's summary: each entry is "podns/pod claimns/claim used".
func summaryOf(entries ...string) string {
	type ref struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	}
	type volume struct {
		Name      string `json:"name"`
		UsedBytes int64  `json:"usedBytes"`
		Capacity  int64  `json:"capacityBytes"`
		PVCRef    ref    `json:"pvcRef"`
	}
	type pod struct {
		PodRef  ref      `json:"podRef"`
		Volumes []volume `json:"volume"`
	}
	var pods []pod
	for _, e := range entries {
		var p, c string
		var used int64
		_, _ = fmt.Sscan(e, &p, &c, &used)
		pns, pname, _ := strings.Cut(p, "/")
		cns, cname, _ := strings.Cut(c, "/")
		pods = append(pods, pod{PodRef: ref{pname, pns}, Volumes: []volume{{Name: "data", UsedBytes: used, Capacity: 1 << 30, PVCRef: ref{cname, cns}}}})
	}
	out, _ := json.Marshal(map[string]any{"node": map[string]any{}, "pods": pods})
	return string(out)
}

// A kubelet's word is kept only for claims that pods placed on its node
// mount: a node cannot set the usage of a claim mounted elsewhere, nor
// of a claim in a namespace its pod is not in.
func TestANodeSpeaksOnlyForTheClaimsMountedOnIt(t *testing.T) {
	env := testenv.Get(t)
	ns := testenv.Namespace(t, env.Client, "usage-a")
	other := testenv.Namespace(t, env.Client, "usage-b")
	a, b := newKubelet(t), newKubelet(t)
	node(t, env, ns+"-a", a)
	node(t, env, ns+"-b", b)
	pod(t, env, ns, "app", ns+"-a", "data")
	pod(t, env, ns, "elsewhere", ns+"-b", "theirs")
	pod(t, env, other, "tenant", ns+"-b", "secret")
	// Node a tells the truth of its own claim, and lies of b's claim and
	// of a claim in another namespace, through its own pod.
	a.summary.Store(summaryOf(ns+"/app "+ns+"/data 1000", ns+"/elsewhere "+ns+"/theirs 666", ns+"/app "+other+"/secret 666"))
	// Node b's kubelet has not measured its claim yet.
	changed := 0
	r := &volumeusage.Reader{Cache: env.Client, Summary: volumeusage.NewKubelets(nil, func(context.Context) (string, error) { return "stats-only", nil }).Summary,
		Changed: func() { changed++ }}
	r.Round(context.Background())
	if u, ok := r.Of(volumeusage.Claim{Namespace: ns, Name: "data"}); !ok || u.Used != 1000 || u.Capacity != 1<<30 {
		t.Errorf("node a's own claim: %+v %v", u, ok)
	}
	if u, ok := r.Of(volumeusage.Claim{Namespace: ns, Name: "theirs"}); ok {
		t.Errorf("node a set the usage of a claim mounted on node b: %+v", u)
	}
	if u, ok := r.Of(volumeusage.Claim{Namespace: other, Name: "secret"}); ok {
		t.Errorf("node a set the usage of a claim in another namespace: %+v", u)
	}
	if got := a.bearer.Load(); got != "Bearer stats-only" {
		t.Errorf("the kubelet was sent %q, not the stats account's token", got)
	}
	if changed != 1 {
		t.Errorf("the page was told of %d changes, want 1", changed)
	}
	r.Round(context.Background())
	if changed != 1 {
		t.Error("a round that changed nothing told the page of a change")
	}
}

// A kubelet whose answer is over the bound is not read to its end, and
// what its node said before is kept; so is it when the kubelet is down.
func TestAnOversizedOrMissingSummaryKeepsWhatWasRead(t *testing.T) {
	env := testenv.Get(t)
	ns := testenv.Namespace(t, env.Client, "usage-big")
	k := newKubelet(t)
	node(t, env, ns+"-a", k)
	pod(t, env, ns, "app", ns+"-a", "data")
	k.summary.Store(summaryOf(ns + "/app " + ns + "/data 1000"))
	r := &volumeusage.Reader{Cache: env.Client, Summary: volumeusage.NewKubelets(nil, nil).Summary}
	r.Round(context.Background())
	padding := strings.Repeat(" ", volumeusage.MaxSummary)
	k.summary.Store(`{"pods":[` + padding + `]}`)
	r.Round(context.Background())
	if u, ok := r.Of(volumeusage.Claim{Namespace: ns, Name: "data"}); !ok || u.Used != 1000 {
		t.Errorf("after an oversized summary: %+v %v", u, ok)
	}
	k.srv.Close()
	r.Round(context.Background())
	if u, ok := r.Of(volumeusage.Claim{Namespace: ns, Name: "data"}); !ok || u.Used != 1000 {
		t.Errorf("with the kubelet down: %+v %v", u, ok)
	}
}
