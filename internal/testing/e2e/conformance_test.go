//go:build conformance

package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
	"github.com/strata-gitops/strata/internal/local/cluster"
	"github.com/strata-gitops/strata/internal/local/images"
	"github.com/strata-gitops/strata/internal/local/kubenode"
	"github.com/strata-gitops/strata/internal/testing/junit"
	"github.com/strata-gitops/strata/internal/testing/testenv"
)

// Kubernetes' storage e2e (`make conformance`): the external-driver mode
// of e2e.test, built from k8s.io/kubernetes/test/e2e at the API server's
// version by hack/control-plane.sh conformance, against the suite's
// cluster on a bridge of its own, so that it may run beside make test.

// The images e2e.test names, under the registries KUBE_TEST_REPO_LIST
// points at strata.local, built here: agnhost from the module proxy,
// busybox from Debian's busybox-static, the pause program.
const (
	e2eRegistry = "strata.local/e2e-test-images"
	agnhostRef  = e2eRegistry + "/agnhost:2.63.0"
	busyboxRef  = e2eRegistry + "/busybox:1.37.0-1"
	pauseRef    = "strata.local/pause:3.10.2"
)

// shellImages are the images storage specs run only a shell command in:
// busybox's files under their names.
var shellImages = []string{busyboxRef, e2eRegistry + "/nginx:1.15-4", e2eRegistry + "/glibc-dns-testing:2.0.0"}

// onlyBackend, from STRATA_CONFORMANCE_BACKEND, runs one backend on a
// cluster of its own, so that both may run at once.
var onlyBackend = os.Getenv("STRATA_CONFORMANCE_BACKEND")

func init() {
	// Nodes and networks of their own, so that make test may run beside.
	prefix, n := "conf", 1
	switch onlyBackend {
	case "lvm":
		prefix, n = "conl", 2
	case "btrfs":
		prefix, n = "conb", 3
	}
	btrfsClassNode = prefix + "-b"
	btrfsHost.Nodes = []string{btrfsClassNode} // the one host the suite uses
	customize = append(customize, func(o *cluster.Options) error {
		o.Nodes = []string{prefix + "-a", btrfsClassNode}
		o.BtrfsMounts, o.Labels = btrfsHost.Mounts(2), btrfsHost.Labels()
		o.Network = kubenode.Network{Bridge: fmt.Sprintf("strata-c%d", n), Prefix: netip.MustParsePrefix(fmt.Sprintf("10.%d.0.0/24", 80+n)),
			PodPrefix: netip.MustParsePrefix(fmt.Sprintf("10.%d.0.0/16", 247+n))}
		o.ServiceCIDR = netip.MustParsePrefix(fmt.Sprintf("10.%d.0.0/16", 99+n))
		return nil
	})
	afterStart = append(afterStart, func(ctx context.Context, c *cluster.Cluster) error {
		imgs, err := conformanceImages(testenv.RepoRoot(), filepath.Join(testenv.RepoRoot(), "bin"))
		if err != nil {
			return err
		}
		return images.Push(ctx, c.Registry(), imgs...)
	})
}

func conformanceImages(root, bin string) ([]images.Image, error) {
	agnhost := filepath.Join(bin, "conformance", "agnhost")
	if _, err := os.Stat(agnhost); err != nil {
		return nil, fmt.Errorf("%s is not built: run hack/control-plane.sh conformance", agnhost)
	}
	shell, err := busybox()
	if err != nil {
		return nil, err
	}
	if err := images.BuildCommands(root, bin); err != nil {
		return nil, err
	}
	out := []images.Image{images.Pause(bin, pauseRef), {Ref: agnhostRef, Entrypoint: []string{"/agnhost"},
		Files: append([]images.File{{Path: "/agnhost", Source: agnhost, Mode: 0o755}}, shell...)}}
	for _, ref := range shellImages {
		out = append(out, images.Image{Ref: ref, Cmd: []string{"sh"}, Files: shell})
	}
	return out, nil
}

// busybox is Debian's static busybox with a link for each of its applets,
// as the busybox image has.
func busybox() ([]images.File, error) {
	const path = "/bin/busybox"
	out, err := exec.Command(path, "--list-full").Output()
	if err != nil {
		return nil, fmt.Errorf("%s --list-full: %w (hack/packages.sh installs busybox-static)", path, err)
	}
	files := []images.File{{Path: path, Source: path, Mode: 0o755}, {Path: "/tmp/.keep"}}
	for _, applet := range strings.Fields(string(out)) {
		if p := "/" + applet; p != path {
			files = append(files, images.File{Path: p, Link: path})
		}
	}
	return files, nil
}

// driver is one backend's test-driver definition.
type driver struct {
	name, class, snapshotClass string
	// hostOnly: the backend's pods can use the btrfs storage host only.
	hostOnly     bool
	capabilities []string
	sizeRange    string
	fsTypes      string
	mountOptions []string
}

var drivers = []driver{
	// The class is xfs, whose least size is 300 MiB: a smaller claim gets
	// a 300 MiB volume, whose snapshot a smaller claim cannot restore.
	{name: "lvm", class: storagev1alpha1.StorageClassName("fast"), snapshotClass: storagev1alpha1.StorageClassName("fast"),
		sizeRange: "{Min: 300Mi, Max: 2Gi}", fsTypes: `{"": {}, xfs: {}, ext4: {}}`,
		mountOptions: []string{"noatime"},
		capabilities: []string{"persistence", "block", "fsGroup", "exec", "snapshotDataSource", "pvcDataSource", "controllerExpansion",
			"nodeExpansion", "onlineExpansion", "topology", "singleNodeVolume", "multipods", "capacity", "readWriteOncePod"}},
	// This machine's kernel has no NFS client: btrfs volumes are used on
	// the storage host only, so the other node is tainted for the run.
	{name: "btrfs", class: btrfsClass, hostOnly: true, sizeRange: "{Min: 64Mi, Max: 2Gi}", fsTypes: `{"": {}}`,
		capabilities: []string{"persistence", "exec", "controllerExpansion", "onlineExpansion", "multipods", "RWX"}},
}

func (d driver) yaml() string {
	var b strings.Builder
	fmt.Fprintf(&b, "StorageClass:\n  FromExistingClassName: %s\n", d.class)
	if d.snapshotClass != "" {
		fmt.Fprintf(&b, "SnapshotClass:\n  FromExistingClassName: %s\n", d.snapshotClass)
	}
	fmt.Fprintf(&b, "DriverInfo:\n  Name: %s\n  SupportedSizeRange: %s\n  SupportedFsType: %s\n  TopologyKeys: [topology.strata.dev/node]\n",
		storagev1alpha1.CSIDriver, d.sizeRange, d.fsTypes)
	if len(d.mountOptions) > 0 {
		fmt.Fprintf(&b, "  SupportedMountOption: {%s: {}}\n", strings.Join(d.mountOptions, ": {}, "))
	}
	b.WriteString("  Capabilities:\n")
	for _, c := range d.capabilities {
		fmt.Fprintf(&b, "    %s: true\n", c)
	}
	return b.String()
}

// TestKubernetesStorageSuite runs e2e.test's External.Storage specs, less
// the Disruptive, Serial and Slow ones, against each backend, and writes
// the counts and skip reasons to bin/conformance/BACKEND.txt.
func TestKubernetesStorageSuite(t *testing.T) {
	c, cl := start(t)
	root := testenv.RepoRoot()
	for _, d := range drivers {
		if onlyBackend != "" && d.name != onlyBackend {
			continue
		}
		t.Run(d.name, func(t *testing.T) {
			dir := filepath.Join(root, "bin", "conformance", d.name)
			if err := os.RemoveAll(dir); err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			files := map[string]string{"driver.yaml": d.yaml(),
				"repos.yaml": "promoterE2eRegistry: " + e2eRegistry + "\ngcRegistry: strata.local\nsigStorageRegistry: strata.local/sig-storage\n"}
			for name, data := range files {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if d.hostOnly {
				untaint := taintOthers(t, cl, btrfsClassNode)
				defer untaint()
			}
			run := exec.Command(filepath.Join(root, "bin", "conformance", "e2e.test"),
				"-kubeconfig", c.KubeconfigPath(), "-storage.testdriver", filepath.Join(dir, "driver.yaml"),
				"-ginkgo.focus", `External.Storage`, "-ginkgo.skip", `\[Disruptive\]|\[Serial\]|\[Slow\]|\[Flaky\]`,
				"-ginkgo.timeout", "80m", "-ginkgo.no-color", "-report-dir", dir,
				"-provider", "skeleton", "-node-os-distro", "debian", "-non-blocking-taints", conformanceTaint)
			run.Env = append(os.Environ(), "KUBE_TEST_REPO_LIST="+filepath.Join(dir, "repos.yaml"))
			log, err := os.Create(filepath.Join(dir, "e2e.log"))
			if err != nil {
				t.Fatal(err)
			}
			defer log.Close()
			run.Stdout, run.Stderr = log, log
			began := time.Now()
			runErr := run.Run()
			summary, failed, err := summarize(filepath.Join(dir, "junit_01.xml")) // the e2e framework names it
			if err != nil {
				t.Fatalf("%v (e2e.test: %v; log %s)", err, runErr, log.Name())
			}
			summary = fmt.Sprintf("backend %s, %s, e2e.test %s\n%s", d.name, time.Since(began).Round(time.Second), runErr, summary)
			if err := os.WriteFile(filepath.Join(root, "bin", "conformance", d.name+".txt"), []byte(summary), 0o644); err != nil {
				t.Fatal(err)
			}
			t.Log(summary)
			for _, f := range failed {
				t.Errorf("failed: %s", f)
			}
		})
	}
}

// conformanceTaint keeps pods off the nodes a backend cannot serve; the
// suite is told it does not make a node unready.
const conformanceTaint = "strata.dev/conformance"

// taintOthers keeps the suite's pods off every node but node until the
// returned function is called.
func taintOthers(t *testing.T, cl client.Client, node string) func() {
	t.Helper()
	taint := corev1.Taint{Key: conformanceTaint, Effect: corev1.TaintEffectNoSchedule}
	nodes := &corev1.NodeList{}
	if err := cl.List(context.Background(), nodes); err != nil {
		t.Fatal(err)
	}
	var tainted []string
	for _, n := range nodes.Items {
		if n.Name == node {
			continue
		}
		n.Spec.Taints = append(n.Spec.Taints, taint)
		if err := cl.Update(context.Background(), &n); err != nil {
			t.Fatal(err)
		}
		tainted = append(tainted, n.Name)
	}
	return func() {
		for _, name := range tainted {
			n := &corev1.Node{}
			if err := cl.Get(context.Background(), client.ObjectKey{Name: name}, n); err != nil {
				t.Error(err)
				continue
			}
			var keep []corev1.Taint
			for _, tt := range n.Spec.Taints {
				if tt.Key != taint.Key {
					keep = append(keep, tt)
				}
			}
			n.Spec.Taints = keep
			if err := cl.Update(context.Background(), n); err != nil {
				t.Error(err)
			}
		}
	}
}

// specsOf keeps the External.Storage specs: the report lists every spec
// of e2e.test.
var specsOf = regexp.MustCompile(`External Storage`)

// summarize counts the report's specs by outcome and the skipped ones by
// reason, and names the failed ones.
func summarize(path string) (string, []string, error) {
	cases, err := junit.Read(path)
	if err != nil {
		return "", nil, err
	}
	var passed, skipped int
	var failed []string
	reasons := map[string]int{}
	for _, c := range cases {
		if !specsOf.MatchString(c.Name) {
			continue
		}
		switch {
		case c.Failed():
			failed = append(failed, c.Name)
		case c.Skipped != nil:
			if strings.TrimSpace(c.Skipped.Message) == "skipped" {
				continue // left out by -ginkgo.focus or -ginkgo.skip
			}
			skipped++
			reasons[skipReason(c.Skipped.Message)]++
		default:
			passed++
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d passed, %d failed, %d skipped\n", passed, len(failed), skipped)
	keys := make([]string, 0, len(reasons))
	for k := range reasons {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return reasons[keys[i]] > reasons[keys[j]] })
	for _, k := range keys {
		fmt.Fprintf(&b, "  %3d skipped: %s\n", reasons[k], k)
	}
	for _, f := range failed {
		fmt.Fprintf(&b, "  failed: %s\n", f)
	}
	return b.String(), failed, nil
}

// skipReason is the first line of a skip message.
func skipReason(message string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(message), "\n")
	return strings.TrimSpace(strings.TrimPrefix(line, "skipped - "))
}
