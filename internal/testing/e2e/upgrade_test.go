package e2e

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/netip"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bbv1 "github.com/strata-gitops/strata/api/buildbarn/v1alpha1"
	failoverv1alpha1 "github.com/strata-gitops/strata/api/failover/v1alpha1"
	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
	volsyncv1alpha1 "github.com/strata-gitops/strata/api/volsync/v1alpha1"
	"github.com/strata-gitops/strata/internal/local/cluster"
	"github.com/strata-gitops/strata/internal/local/kubenode"
	"github.com/strata-gitops/strata/internal/local/release"
	"github.com/strata-gitops/strata/internal/testing/bbexample"
	"github.com/strata-gitops/strata/internal/testing/testenv"
)

// upgradeNetwork is the upgrade test's own cluster's: it runs beside
// the suite's.
var upgradeNetwork = kubenode.Network{Bridge: "strata-g0", Prefix: netip.MustParsePrefix("10.84.0.0/24"),
	PodPrefix: netip.MustParsePrefix("10.252.0.0/16")}

// maxUpgradeGap bounds the time between two lines of a counter across
// the upgrade: its pod is never restarted, so only a volume that stalled
// under it would leave a gap; it writes every 50 ms.
const maxUpgradeGap = 5 * time.Second

// The release of the previous tag (or of the merge base with main, when
// there is none), installed on a cluster of its own,
// runs an LVM claim and a btrfs claim each with a pod counting into it, a
// replicated pair with its Failover, a Buildbarn storage and a claim
// filled from a VM image. It is upgraded to the source tree's release as
// docs/install.md says (push, CRDs server-side, helm upgrade). After:
// every claim keeps its data, no counter's sequence has a gap, no pod,
// claim, volume or pair was made again, the Failover still protects its
// app and the pair syncs again. The timeline is logged.
func TestUpgradeFromThePreviousRelease(t *testing.T) {
	testenv.NeedRoot(t, "the local cluster's nodes")
	if skip := testenv.LocalClusterMissing(); skip != "" {
		testenv.Unavailable(t, skip)
	}
	ctx := context.Background()
	if err := localRelease(ctx); err != nil {
		t.Fatal(err)
	}
	previous, err := release.Previous(ctx, testenv.RepoRoot())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("upgrading from %s (%s) to %s", previous.Version, previous.Dir, stack.release.Version)
	hosts := btrfsHost
	hosts.Nodes = []string{"upg-a", "upg-b"}
	c, cl := upgradeCluster(t, hosts)
	// The apps run the source tree's example app, whichever strata runs.
	if err := stack.release.Push(ctx, c.Registry()); err != nil {
		t.Fatal(err)
	}
	if err := install(ctx, c, cl, previous, hosts, nil); err != nil {
		t.Fatalf("installing %s: %v", previous.Version, err)
	}
	if err := storageClasses(ctx, c, cl, hosts); err != nil {
		t.Fatal(err)
	}
	w := newUpgradeWorkloads(t, c, cl)
	before := w.objects()
	counted := w.counters()

	var timeline []string
	began := time.Now()
	mark := func(step string) {
		timeline = append(timeline, fmt.Sprintf("%6.1f s  %s", time.Since(began).Seconds(), step))
	}
	if err := install(ctx, c, cl, stack.release, hosts, mark); err != nil {
		t.Fatalf("upgrading to %s: %v", stack.release.Version, err)
	}
	runsOnly(t, cl, stack.release)
	w.ledger.waitPhase(failoverv1alpha1.PhaseProtected, failoverv1alpha1.ActivePrimary)
	mark("Failover Protected, primary active")
	w.ledger.sync("after-upgrade", w.ledger.a)
	mark("pair synced again")
	waitReady(t, cl, w.buildbarn, &bbv1.BuildbarnStorageList{})
	mark("Buildbarn storage Ready")
	w.readImage("after")
	mark("image-filled claim read back")
	w.checkCounters(counted, began)
	mark("counters checked")
	if diff := w.remade(before, w.objects()); len(diff) > 0 {
		t.Errorf("the upgrade made again what it did not need to: %s", strings.Join(diff, "; "))
	}
	t.Logf("upgrade timeline from %s to %s:\n%s", previous.Version, stack.release.Version, strings.Join(timeline, "\n"))
}

// runsOnly checks that every container of strata's pods runs an image
// of the release, by the digest of the release's index.
func runsOnly(t *testing.T, cl client.Client, built *release.Built) {
	t.Helper()
	pods := &corev1.PodList{}
	if err := cl.List(context.Background(), pods, client.InNamespace(namespace)); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			continue // an old pod on its way out
		}
		for _, c := range p.Spec.Containers {
			name, _, _ := strings.Cut(strings.TrimPrefix(c.Image, cluster.RegistryName+"/"+release.ImagePrefix+"/"), ":")
			want, err := built.Ref(cluster.RegistryName, name)
			if err != nil {
				t.Fatalf("pod %s runs %s, not an image of the release: %v", p.Name, c.Image, err)
			}
			if digest := want[strings.Index(want, "@"):]; !strings.HasSuffix(c.Image, digest) {
				t.Errorf("pod %s runs %s after the upgrade, not %s", p.Name, c.Image, want)
			}
		}
	}
}

// upgradeCluster starts the upgrade test's cluster, stopped at the end;
// its directory is kept when the test fails.
func upgradeCluster(t *testing.T, hosts release.BtrfsHost) (*cluster.Cluster, client.Client) {
	t.Helper()
	dir, err := os.MkdirTemp("", "strata-upgrade-")
	if err != nil {
		t.Fatal(err)
	}
	c, cl, err := newCluster(context.Background(), suiteCluster{dir: dir, nodes: hosts.Nodes, network: upgradeNetwork,
		serviceCIDR: netip.MustParsePrefix("10.104.0.0/16"), hosts: hosts})
	if c != nil {
		t.Cleanup(func() {
			if err := c.Stop(); err != nil {
				t.Error(err)
			}
			if !t.Failed() {
				_ = os.RemoveAll(dir)
			}
		})
	}
	if err != nil {
		t.Fatal(err)
	}
	return c, cl
}

// upgradeWorkloads are what runs through the upgrade.
type upgradeWorkloads struct {
	t  *testing.T
	c  *cluster.Cluster
	cl client.Client
	// ns holds the counters and the image claim; buildbarn the storage.
	ns, buildbarn string
	counting      []string // pods counting into their claims
	ledger        *ledger
	image         *corev1.PersistentVolumeClaim
	imageDigest   string
}

func newUpgradeWorkloads(t *testing.T, c *cluster.Cluster, cl client.Client) *upgradeWorkloads {
	t.Helper()
	w := &upgradeWorkloads{t: t, c: c, cl: cl, ns: namespaceFor(t, cl, "upgrade"), buildbarn: namespaceFor(t, cl, "upgrade-bb")}
	w.count("lvm-seq", "", c.Nodes[0])
	w.count("btrfs-seq", localClass(c.Nodes[1].Name()), c.Nodes[1])
	w.ledger = newLedgerOf(t, c, cl, "upgrade-ledger", volsyncv1alpha1.ProviderLVM)
	w.ledger.sync("before-upgrade", w.ledger.a)
	for _, obj := range bbexample.Objects(t, "20240310T090416Z-28dbdbb", "unused") {
		if s, ok := obj.(*bbv1.BuildbarnStorage); ok {
			s.SetNamespace(w.buildbarn)
			s.GetComponent().Image = stack.exampleApp
			create(t, cl, s)
		}
	}
	waitReady(t, cl, w.buildbarn, &bbv1.BuildbarnStorageList{})
	shardClaims(t, cl, w.buildbarn)
	w.fillFromImage()
	w.readImage("before")
	return w
}

// count runs a pod counting into a claim of class ("" the default) on
// node, and waits until it serves lines.
func (w *upgradeWorkloads) count(name, class string, node *kubenode.Node) {
	claim := newClaim(w.ns, name, "256Mi")
	if class != "" {
		claim.Spec.StorageClassName = &class
	}
	grace := int64(1)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: name}, Spec: corev1.PodSpec{
		NodeSelector: map[string]string{corev1.LabelHostname: node.Name()}, TerminationGracePeriodSeconds: &grace,
		Containers: []corev1.Container{{Name: "count", Image: stack.exampleApp, ImagePullPolicy: corev1.PullIfNotPresent,
			Args: []string{"count", "/data"}, VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}}},
		Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: name}}}},
	}}
	create(w.t, w.cl, claim, pod)
	w.counting = append(w.counting, name)
	w.lines(name, 10)
}

// lines waits until the counting pod serves at least n lines, and
// returns them.
func (w *upgradeWorkloads) lines(name string, n int) []line {
	w.t.Helper()
	var lines []line
	testenv.Eventually(w.t, 3*time.Minute, func() error {
		pod := &corev1.Pod{}
		if err := w.cl.Get(context.Background(), client.ObjectKey{Namespace: w.ns, Name: name}, pod); err != nil {
			return err
		}
		if !podReady(pod) && pod.Status.Phase != corev1.PodRunning {
			return fmt.Errorf("pod %s is %s: %v", name, pod.Status.Phase, pod.Status.Conditions)
		}
		body, err := fetch("http://" + pod.Status.PodIP + ":8080/")
		if err != nil {
			return err
		}
		if lines = parseLines(body); len(lines) < n {
			return fmt.Errorf("pod %s has %d lines, waiting for %d", name, len(lines), n)
		}
		return nil
	})
	return lines
}

// counters reads what every counter holds now.
func (w *upgradeWorkloads) counters() map[string][]line {
	held := map[string][]line{}
	for _, name := range w.counting {
		held[name] = w.lines(name, 10)
	}
	held["ledger"] = w.ledger.serving(w.ledger.a, 10)
	return held
}

// checkCounters checks that each counter still holds what it held before
// the upgrade and counted on through it, with no gap longer than
// maxUpgradeGap since began.
func (w *upgradeWorkloads) checkCounters(before map[string][]line, began time.Time) {
	w.t.Helper()
	for name, had := range before {
		var now []line
		if name == "ledger" {
			now = w.ledger.serving(w.ledger.a, len(had)+20)
		} else {
			now = w.lines(name, len(had)+20)
		}
		if !isPrefix(had, now) {
			w.t.Errorf("%s: after the upgrade the claim holds %s; before it held %s, which is not its start", name, describe(now), describe(had))
			continue
		}
		gap := longestGap(now, began.Add(-time.Second).UnixNano())
		w.t.Logf("%s: %s; longest gap between two lines since the upgrade began: %s", name, describe(now), gap)
		if gap > maxUpgradeGap {
			w.t.Errorf("%s: a gap of %s in its sequence during the upgrade; its pod was never restarted, so want under %s", name, gap, maxUpgradeGap)
		}
	}
}

// longestGap is the longest time between two lines written after from.
func longestGap(lines []line, from int64) time.Duration {
	var longest int64
	for i := 1; i < len(lines); i++ {
		if lines[i].at >= from && lines[i].at-lines[i-1].at > longest {
			longest = lines[i].at - lines[i-1].at
		}
	}
	return time.Duration(longest)
}

// fillFromImage makes a VolumeImage of a qcow2 disk in a MinIO on this
// machine and an LVM block claim filled from it.
func (w *upgradeWorkloads) fillFromImage() {
	w.t.Helper()
	minio := testenv.StartMinIOAt(w.t, upgradeNetwork.HostIP().String())
	disk := make([]byte, 4<<20)
	_, _ = rand.Read(disk[:1<<20])
	minio.Put(w.t, "images", testenv.WithChecksums(map[string][]byte{"vm/disk.qcow2": testenv.Qcow2(w.t, disk)}))
	sum := sha256.Sum256(disk)
	w.imageDigest = "sha256:" + hex.EncodeToString(sum[:])
	create(w.t, w.cl,
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "bucket"},
			StringData: map[string]string{"accessKey": minio.AccessKey, "secretKey": minio.SecretKey}},
		&storagev1alpha1.VolumeImage{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "vm"}, Spec: storagev1alpha1.VolumeImageSpec{
			URL: minio.Endpoint + "/images/vm/disk.qcow2", Format: "qcow2", CredentialsSecretRef: &storagev1alpha1.LocalObjectReference{Name: "bucket"}}})
	w.image = newClaim(w.ns, "vm", "64Mi")
	mode := corev1.PersistentVolumeBlock
	w.image.Spec.VolumeMode = &mode
	w.image.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("64Mi")
	group := storagev1alpha1.GroupVersion.Group
	w.image.Spec.DataSourceRef = &corev1.TypedObjectReference{APIGroup: &group, Kind: storagev1alpha1.VolumeImageKind, Name: "vm"}
	create(w.t, w.cl, w.image)
}

// readImage reads the image-filled claim's disk with a new pod and
// checks it is the image's.
func (w *upgradeWorkloads) readImage(name string) {
	w.t.Helper()
	pod := readerPod(w.ns, "read-"+name, w.image.Name, 4<<20)
	pod.Spec.NodeSelector = map[string]string{corev1.LabelHostname: w.c.Nodes[0].Name()}
	pod.Spec.Containers[0].VolumeDevices = []corev1.VolumeDevice{{Name: "disk", DevicePath: "/dev/vm"}}
	create(w.t, w.cl, pod)
	var got string
	testenv.Eventually(w.t, 4*time.Minute, func() error {
		if err := w.cl.Get(context.Background(), client.ObjectKeyFromObject(pod), pod); err != nil {
			return err
		}
		if pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodRunning {
			return fmt.Errorf("pod %s is %s: %v", pod.Name, pod.Status.Phase, pod.Status.Conditions)
		}
		logs, err := podLogsIn(w.c.Config, pod)
		if got = strings.TrimSpace(logs); err != nil || got == "" {
			return fmt.Errorf("the reader has printed nothing yet (%v)", err)
		}
		return nil
	})
	if got != w.imageDigest {
		w.t.Fatalf("%s the upgrade, claim %s's disk hashes to %s; the image's disk to %s", name, w.image.Name, got, w.imageDigest)
	}
	if err := w.cl.Delete(context.Background(), pod); err != nil {
		w.t.Fatal(err)
	}
	testenv.Eventually(w.t, 2*time.Minute, func() error { return gone(context.Background(), w.cl, pod) })
}

// objects are the identities of everything that holds or serves data:
// claims, volumes, logical volumes, the pair, the Failover, the
// Buildbarn storage and the apps' pods, by kind/namespace/name.
func (w *upgradeWorkloads) objects() map[string]types.UID {
	w.t.Helper()
	ids := map[string]types.UID{}
	lists := []client.ObjectList{&corev1.PersistentVolumeClaimList{}, &corev1.PersistentVolumeList{},
		&storagev1alpha1.LogicalVolumeList{}, &storagev1alpha1.LVMClusterList{},
		&volsyncv1alpha1.ReplicationSourceList{}, &volsyncv1alpha1.ReplicationDestinationList{},
		&failoverv1alpha1.FailoverList{}, &bbv1.BuildbarnStorageList{}, &corev1.PodList{}}
	for _, list := range lists {
		if err := w.cl.List(context.Background(), list); err != nil {
			w.t.Fatal(err)
		}
		items, err := metaItems(list)
		if err != nil {
			w.t.Fatal(err)
		}
		for _, o := range items {
			if _, pod := list.(*corev1.PodList); pod && (o.GetNamespace() == namespace || strings.HasPrefix(o.GetName(), "read-")) {
				continue // strata's own pods are replaced by the upgrade; readers come and go
			}
			ids[fmt.Sprintf("%T %s/%s", list, o.GetNamespace(), o.GetName())] = o.GetUID()
		}
	}
	return ids
}

// remade lists what is gone or another object since before.
func (w *upgradeWorkloads) remade(before, after map[string]types.UID) []string {
	var diff []string
	for key, uid := range before {
		switch now, ok := after[key]; {
		case !ok:
			diff = append(diff, key+" is gone")
		case now != uid:
			diff = append(diff, key+" was made again")
		}
	}
	sort.Strings(diff)
	return diff
}

// metaItems are a list's items' metadata.
func metaItems(list client.ObjectList) ([]metav1.Object, error) {
	objs, err := meta.ExtractList(list)
	if err != nil {
		return nil, err
	}
	out := make([]metav1.Object, 0, len(objs))
	for _, o := range objs {
		m, err := meta.Accessor(o)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}
