// Package guest runs tests on a real Linux kernel in a qemu guest: the
// kernel of Debian's cloud images and the storage tools of the node,
// built from pinned packages by hack/guest, where device-mapper,
// dm-thin-pool and the kernel's NFS server are (this machine's kernel may
// have none). A test calls Delegate first: on the host, Delegate runs the
// same test in a guest and reports what it did as the test's own results;
// in the guest, it returns false and the test goes on.
package guest

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/strata-gitops/strata/internal/testing/testenv"
)

// Options are what a test's guest is given.
type Options struct {
	// Disks are the sizes of the virtio disks the guest sees as
	// /dev/vda, /dev/vdb, ... (sparse files on the host).
	Disks []int64
	// MemoryMiB is the guest's memory; the initramfs and every file the
	// test writes under / or /tmp are in it. 2048 when zero.
	MemoryMiB int
	// Timeout bounds the whole guest, boot to power-off; 25 minutes
	// when zero: a software-emulated guest on 2 busy cores runs a suite
	// of many tests (lvmnode's, about 6 minutes alone) twice as slowly,
	// and the bound is for a guest that hangs, within go test's 40.
	Timeout time.Duration
	// Files are paths under the repository (files or folders) the test
	// reads, copied into the guest at the same place: the test runs in
	// its package's folder under a copy of the repository's root.
	Files []string
	// Env are variables the test is run with, NAME=value.
	Env []string
	// APIServer hands the package's API server (testenv.Get) to the
	// guest, where testenv.Get returns it: the guest reaches the host's
	// loopback at 10.0.2.2.
	APIServer bool
	// Run, when set, is the pattern of the package's tests the guest
	// runs (go test -run), each reported as a subtest of the calling
	// test; by default the guest runs the calling test alone.
	Run string
	// Peer, when set, starts a second guest on a network of their own
	// (10.0.3.1 this one, 10.0.3.2 the peer) that serves commands to the
	// test (PeerRun).
	Peer bool
}

// InGuest reports whether this process runs in the test guest.
func InGuest() bool { return os.Getenv(inGuestVar) == "1" }

const (
	inGuestVar = "STRATA_GUEST"
	// repoInGuest is where the repository's copy is in the guest.
	repoInGuest = "/repo"
	// exitMark starts the line the guest's init writes when the test has
	// ended, with its exit code.
	exitMark = "strata-guest-exit "
)

// Delegate runs the calling test in a guest and reports its results as
// t's and its subtests', and returns true: the caller returns. In the
// guest it returns false, and the test runs.
func Delegate(t *testing.T, o Options) bool {
	t.Helper()
	if InGuest() {
		return false
	}
	if strings.Contains(t.Name(), "/") {
		t.Fatal("guest.Delegate is for a top-level test: the guest runs it by its name")
	}
	testenv.NeedTools(t, "qemu-system-x86_64")
	if o.MemoryMiB == 0 {
		o.MemoryMiB = 2048
	}
	if o.Timeout == 0 {
		o.Timeout = 25 * time.Minute
	}
	top := t.Name()
	if o.Run == "" {
		o.Run = "^" + regexp.QuoteMeta(t.Name()) + "$"
	} else {
		top = ""
	}
	img, bin, dir := image(t), testBinary(t), t.TempDir()
	extra := map[string][]byte{}
	if o.APIServer {
		extra[strings.TrimPrefix(kubeconfigInGuest, "/")] = kubeconfigForGuest(t)
		o.Env = append(o.Env, testenv.KubeconfigVar+"="+kubeconfigInGuest)
	}
	initrd, err := initrdFor(img, dir, bin, o, extra)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.Timeout)
	defer cancel()
	m := &machine{name: "guest", dir: dir, kernel: filepath.Join(img, "vmlinuz"), initrd: initrd, o: o}
	var peer *machine
	if o.Peer {
		if peer, err = startPeer(ctx, t, m); err != nil {
			t.Fatal(err)
		}
		defer peer.stop()
	}
	out, err := m.run(ctx, t)
	report(t, top, out, err, m, peer)
	return true
}

// report replays the guest's -test.v output as t's results, and on a
// failure adds the guests' kernel logs.
func report(t *testing.T, top string, out []byte, runErr error, guests ...*machine) {
	t.Helper()
	r := parse(out, top)
	r.replay(t, top)
	if res := r.byName[top]; top != "" && res != nil && res.status == "SKIP" {
		t.Skip("skipped in the guest")
	}
	switch {
	case !r.ended:
		t.Errorf("the guest ended before the test did: %v", runErr)
	case r.code != 0:
		t.Errorf("the test binary exited %d in the guest", r.code)
	case runErr != nil:
		t.Errorf("the guest: %v", runErr)
	default:
		return
	}
	if len(r.order) == 0 {
		t.Logf("the guest's output:\n%s", out)
	}
	for _, g := range guests {
		if g != nil {
			t.Logf("%s's kernel log:\n%s", g.name, g.kernelLog())
		}
	}
}
