package replicas

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/strata-gitops/strata/internal/testing/testenv"
)

// mapperEnv makes the test binary, started again, the helper that maps
// a file shared and writable, closes it, and writes through the mapping.
const mapperEnv = "STRATA_TEST_MAPPER_FILE"

// TestHelperMapper is the helper's body; it does nothing in a normal run.
func TestHelperMapper(t *testing.T) {
	path := os.Getenv(mapperEnv)
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil || f.Truncate(4096) != nil {
		os.Exit(2)
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		os.Exit(3)
	}
	f.Close() // only the mapping is left
	os.Stdout.WriteString("mapped\n")
	for i := 0; ; i++ {
		mem[i%4096] = byte(i)
		_ = unix.Msync(mem, unix.MS_SYNC)
		time.Sleep(10 * time.Millisecond)
	}
}

// A process that writes through a shared mapping of a file it has
// closed is a writer too: the fence kills it.
func TestAFenceKillsAWriterThroughASharedMapping(t *testing.T) {
	testenv.NeedRoot(t, "a tmpfs of its own, so that no other process's files share its device")
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	mapper := exec.Command(os.Args[0], "-test.run=^TestHelperMapper$")
	mapper.Env = append(os.Environ(), mapperEnv+"="+filepath.Join(dir, "db"))
	out, err := mapper.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := mapper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mapper.Process.Kill() })
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || strings.TrimSpace(line) != "mapped" {
		t.Fatalf("the mapper did not map its file: %q, %v", line, err)
	}
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		t.Fatal(err)
	}
	if err := KillWriters(st.Dev); err != nil {
		t.Fatal(err)
	}
	ended := make(chan error, 1)
	go func() { ended <- mapper.Wait() }()
	select {
	case err := <-ended:
		if err == nil || !strings.Contains(err.Error(), "killed") {
			t.Fatalf("the writer through a shared mapping ended with %v; want it killed by the fence", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the writer through a shared mapping still runs after the fence")
	}
}
