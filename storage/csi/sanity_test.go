package csi_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/strata-gitops/strata/internal/testing/csienv"
	"github.com/strata-gitops/strata/internal/testing/guest"
	"github.com/strata-gitops/strata/internal/testing/junit"
	"github.com/strata-gitops/strata/internal/testing/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// startCSI runs the driver with the loopback backend on a loop disk, as
// a node and a device class of their own, so that the tests of this
// package do not see each other's.
func startCSI(t *testing.T, name string, tweaks ...func(*csienv.Options)) *csienv.Env {
	t.Helper()
	testenv.NeedRoot(t, "loop devices and mounts")
	testenv.NeedTools(t, "lvm", "losetup", "mkfs.ext4", "resize2fs", "blkid")
	o := csienv.Defaults(t.TempDir())
	o.Backend, o.Node, o.Class = "loopback", name+"-node", name
	return startEnv(t, csienv.Start, o, tweaks)
}

// startEnv starts an environment, stopped when the test ends.
func startEnv(t *testing.T, start func(context.Context, *rest.Config, csienv.Options) (*csienv.Env, error),
	o csienv.Options, tweaks []func(*csienv.Options)) *csienv.Env {
	t.Helper()
	for _, tweak := range tweaks {
		tweak(&o)
	}
	e, err := start(context.Background(), testenv.Get(t).Config, o)
	if e != nil {
		t.Cleanup(func() {
			if err := e.Stop(); err != nil {
				t.Error(err)
			}
		})
	}
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestSanity runs the CSI community's conformance suite, csi-sanity,
// against both services with an LVM class. Any failed spec fails the test.
// csi-sanity's volumes are 10 GiB each, and the agent reports the room a
// deletion frees about two seconds later (its batched volume-group pass):
// the default 8 GiB disk, 72 GiB thin and overprovisioned, ran out now
// and then between specs. A sparse 32 GiB disk leaves room for the suite.
func TestSanity(t *testing.T) {
	sanity := sanityBinary(t)
	runSanity(t, sanity, startCSI(t, "sanity", func(o *csienv.Options) { o.DiskSize = 32 << 30 }))
}

// TestSanityLVM2 runs csi-sanity against the LVM backend with the lvm2
// volume manager, the one every node runs, in a guest on Debian's kernel
// (internal/testing/guest): the agent makes a volume group and a thin
// pool on a loop disk with lvm2, and the node service formats and mounts
// device-mapper volumes. The API server is the host's. SANITY_ARGS, when
// set, are added to csi-sanity's (make sanity BACKEND=lvm2).
func TestSanityLVM2(t *testing.T) {
	if guest.Delegate(t, guest.Options{APIServer: true, MemoryMiB: 3072,
		Files: []string{"bin/csi-sanity", "docs/csi.md"}, Env: []string{"SANITY_ARGS=" + os.Getenv("SANITY_ARGS")}}) {
		return
	}
	sanity := sanityBinary(t)
	e := startCSI(t, "sanity-lvm2", func(o *csienv.Options) { o.DiskSize, o.Backend = 32<<30, "lvm2" })
	runSanity(t, sanity, e, strings.Fields(os.Getenv("SANITY_ARGS"))...)
}

// TestSanityBtrfs runs csi-sanity against the btrfs backend: a btrfs
// class whose agent is on this node, so volumes are staged by bind mount.
// The agent serves TLS with a certificate its CA issued at start, and the
// class names that CA: every call of the run goes over it.
func TestSanityBtrfs(t *testing.T) {
	sanity := sanityBinary(t)
	runSanity(t, sanity, startBtrfs(t, "sanity-btrfs", func(o *csienv.Options) { o.BtrfsTLS = true }))
}

// startBtrfs runs the driver's btrfs path on a loop disk, with NFS-Ganesha
// and the agent's volume API.
func startBtrfs(t *testing.T, name string, tweaks ...func(*csienv.Options)) *csienv.Env {
	t.Helper()
	testenv.NeedRoot(t, "loop devices, btrfs and mounts")
	testenv.NeedTools(t, "mkfs.btrfs", "btrfs", "ganesha.nfsd")
	o := csienv.Defaults(t.TempDir())
	o.Node, o.Class, o.DiskSize = name+"-node", name, 32<<30
	return startEnv(t, csienv.StartBtrfs, o, tweaks)
}

func sanityBinary(t *testing.T) string {
	sanity := filepath.Join(testenv.RepoRoot(), "bin", "csi-sanity")
	if _, err := os.Stat(sanity); err != nil {
		testenv.Unavailable(t, "bin/csi-sanity is not installed (make test installs it through hack/tools.sh)")
	}
	return sanity
}

func runSanity(t *testing.T, sanity string, e *csienv.Env, extra ...string) {
	t.Helper()
	report := filepath.Join(t.TempDir(), "junit.xml")
	args := append(e.SanityArgs(), "-csi.junitfile", report, "-ginkgo.fail-fast", "-ginkgo.no-color")
	out, err := exec.Command(sanity, append(args, extra...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("csi-sanity failed: %v\n%s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "Passed |") {
			t.Log("csi-sanity:", strings.TrimSpace(line))
		}
	}
	checkSkipsDocumented(t, report)
}

// checkSkipsDocumented fails for every spec csi-sanity skipped that
// docs/csi.md does not list with its reason.
func checkSkipsDocumented(t *testing.T, report string) {
	t.Helper()
	cases, err := junit.Read(report)
	if err != nil {
		t.Fatal(err)
	}
	docs, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "docs", "csi.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		if c.Skipped != nil && !strings.Contains(string(docs), specName(c.Name)) {
			t.Errorf("csi-sanity skipped %q (%s), and docs/csi.md does not list it", specName(c.Name), c.Skipped.Message)
		}
	}
	if len(cases) == 0 {
		t.Fatalf("csi-sanity's report %s lists no specs", report)
	}
}

// specName drops ginkgo's node-type prefix from a spec's name.
func specName(name string) string {
	return strings.TrimSpace(strings.TrimPrefix(name, "[It]"))
}
