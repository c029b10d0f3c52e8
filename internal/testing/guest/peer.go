package guest

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/strata-gitops/strata/hack/debian"
	"github.com/strata-gitops/strata/internal/testing/testenv"
)

// The peer guest serves commands on the guests' own network: each
// connection sends one line, a shell command, and gets its output and a
// last line with its exit code.
const (
	peerAddr     = "10.0.3.2:7000"
	peerExitMark = "strata-peer-exit "
	peerServe    = `#!/bin/sh
read -r line
sh -c "$line" </dev/null 2>&1
echo "` + peerExitMark + `$?"
`
	kubeconfigInGuest = "/guest/kubeconfig"
)

// startPeer boots the second guest, joined to m by a network of qemu
// UDP sockets on the host's loopback (neither has to wait for the other).
func startPeer(ctx context.Context, t *testing.T, m *machine) (*machine, error) {
	ports, err := freeUDPPorts(2)
	if err != nil {
		return nil, err
	}
	peer := &machine{name: "peer", dir: m.dir, kernel: m.kernel, o: Options{MemoryMiB: 1024},
		ip: "10.0.3.2/24", mac: "52:54:00:00:03:02",
		net: fmt.Sprintf("udp=127.0.0.1:%d,localaddr=127.0.0.1:%d", ports[0], ports[1])}
	m.ip, m.mac = "10.0.3.1/24", "52:54:00:00:03:01"
	m.net = fmt.Sprintf("udp=127.0.0.1:%d,localaddr=127.0.0.1:%d", ports[1], ports[0])
	peer.initrd = filepath.Join(m.dir, "peer-initrd.cpio")
	if err := peerInitrd(filepath.Dir(m.kernel), peer.initrd); err != nil {
		return nil, err
	}
	return peer, peer.start(ctx, t)
}

// peerInitrd is the guest's initramfs with the command server as its run.
func peerInitrd(img, path string) error {
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	defer out.Close()
	if err := copyFile(out, filepath.Join(img, "initrd.cpio")); err != nil {
		return err
	}
	files := debian.Rootfs{}
	files.Put("guest/serve", 0o755, []byte(peerServe))
	files.Put("guest/run", 0o755, []byte("#!/bin/sh\nexec busybox nc -ll -p 7000 -e /guest/serve\n"))
	if err := files.Cpio(out); err != nil {
		return err
	}
	return out.Close()
}

func freeUDPPorts(n int) ([]int, error) {
	var ports []int
	var conns []net.PacketConn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range n {
		c, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		conns = append(conns, c)
		ports = append(ports, c.LocalAddr().(*net.UDPAddr).Port)
	}
	return ports, nil
}

// PeerAddress is the peer guest's address on the guests' network.
const PeerAddress = "10.0.3.2"

// PeerRun runs a shell command on the peer guest, from the test in the
// guest (Options.Peer), and returns its output and exit code. The first
// call waits for the peer to serve, up to a minute.
func PeerRun(t testing.TB, command string) (string, int) {
	t.Helper()
	peerReady.Do(func() { waitForPeer(t) })
	out, code, err := peerCall(command)
	if err != nil {
		t.Fatalf("the peer guest, running %q: %v", command, err)
	}
	return out, code
}

var peerReady sync.Once

// waitForPeer waits, up to a minute, until the peer runs a command: its
// command server starts last when it boots, and a connection made as it
// starts can end before the command is read.
func waitForPeer(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		_, code, err := peerCall("true")
		if err == nil && code == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the peer guest does not run commands at %s: %v", peerAddr, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// peerCall runs one command on the peer.
func peerCall(command string) (string, int, error) {
	conn, err := net.DialTimeout("tcp", peerAddr, 2*time.Second)
	if err != nil {
		return "", 0, err
	}
	defer conn.Close()
	if _, err := fmt.Fprintln(conn, command); err != nil {
		return "", 0, err
	}
	var lines []string
	code := -1
	sc := bufio.NewScanner(conn)
	for sc.Scan() {
		// Output that does not end its last line has the mark after it.
		line := sc.Text()
		if before, rest, ok := strings.Cut(line, peerExitMark); ok {
			if _, err := fmt.Sscan(rest, &code); err != nil {
				return "", 0, fmt.Errorf("its exit line %q: %w", line, err)
			}
			line = before
			if line == "" {
				continue
			}
		}
		lines = append(lines, line)
	}
	if code < 0 {
		return "", 0, fmt.Errorf("it ended without an exit code (%v)", sc.Err())
	}
	return strings.Join(lines, "\n"), code, nil
}

// kubeconfigForGuest is the package's API server's administrator
// kubeconfig as the guest reaches it: at the host's 10.0.2.2, with the
// serving certificate's own name.
func kubeconfigForGuest(t *testing.T) []byte {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(testenv.Get(t).KubeconfigFile(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cfg.Clusters {
		c.Server = strings.Replace(c.Server, "127.0.0.1", "10.0.2.2", 1)
		c.TLSServerName = "localhost"
	}
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
