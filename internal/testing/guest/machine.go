package guest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strata-gitops/strata/internal/testing/testenv"
)

// machine is one qemu guest.
type machine struct {
	name           string
	dir            string // where its disks, console log and output are
	kernel, initrd string
	o              Options
	// net is the second network card's qemu socket options, and ip this
	// guest's address on it; none when empty.
	net, ip string
	mac     string
	cmd     *exec.Cmd
	out     bytes.Buffer
}

func (m *machine) consolePath() string { return filepath.Join(m.dir, m.name+"-console.log") }

// args is qemu's command line for the machine.
func (m *machine) args(accel string) ([]string, error) {
	cpu := "max"
	if accel == "kvm" {
		cpu = "host"
	}
	cmdline := "console=ttyS0 panic=-1 quiet strata.hostname=" + m.name
	if m.ip != "" {
		cmdline += " strata.ip=" + m.ip
	}
	args := []string{"-machine", "pc,accel=" + accel, "-cpu", cpu, "-m", fmt.Sprint(m.o.MemoryMiB), "-smp", "2",
		"-nodefaults", "-display", "none", "-no-reboot", "-kernel", m.kernel, "-initrd", m.initrd, "-append", cmdline,
		"-serial", "file:" + m.consolePath(), "-serial", "stdio", "-monitor", "none",
		"-netdev", "user,id=n0", "-device", "virtio-net-pci,netdev=n0"}
	if m.net != "" {
		args = append(args, "-netdev", "socket,id=n1,"+m.net, "-device", "virtio-net-pci,netdev=n1,mac="+m.mac)
	}
	for i, size := range m.o.Disks {
		disk := filepath.Join(m.dir, fmt.Sprintf("%s-disk%d.img", m.name, i))
		f, err := os.Create(disk)
		if err != nil {
			return nil, err
		}
		err = f.Truncate(size)
		f.Close()
		if err != nil {
			return nil, err
		}
		args = append(args, "-drive", "file="+disk+",format=raw,if=virtio,cache=unsafe")
	}
	return args, nil
}

// start boots the machine; its second serial port, where the test's
// output goes, is collected.
func (m *machine) start(ctx context.Context, t *testing.T) error {
	args, err := m.args(accelerator(t, m.kernel, m.initrd))
	if err != nil {
		return err
	}
	m.cmd = exec.CommandContext(ctx, "qemu-system-x86_64", args...)
	m.cmd.Stdout = &m.out
	// What the test writes is also in bin/guest/logs as it comes, for
	// a person to follow (tail -f) a long run.
	if log, err := os.Create(logPath(t, m.name)); err == nil {
		m.cmd.Stdout = io.MultiWriter(&m.out, log)
		t.Cleanup(func() { log.Close() })
	}
	var stderr bytes.Buffer
	m.cmd.Stderr = &stderr
	m.cmd.WaitDelay = 5 * time.Second
	if err := m.cmd.Start(); err != nil {
		return fmt.Errorf("qemu-system-x86_64: %w", err)
	}
	return nil
}

// run boots the machine and waits until it powers off, and returns what
// the test wrote.
func (m *machine) run(ctx context.Context, t *testing.T) ([]byte, error) {
	if err := m.start(ctx, t); err != nil {
		return nil, err
	}
	err := m.cmd.Wait()
	if ctx.Err() != nil {
		err = fmt.Errorf("stopped after the whole-guest timeout of %s", m.o.Timeout)
	}
	return m.out.Bytes(), err
}

// stop powers the machine off.
func (m *machine) stop() {
	if m.cmd != nil && m.cmd.Process != nil {
		_ = m.cmd.Process.Kill()
		_ = m.cmd.Wait()
	}
}

// kernelLog is the last of the machine's console: the kernel's messages.
func (m *machine) kernelLog() string {
	data, err := os.ReadFile(m.consolePath())
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > 200 {
		lines = lines[len(lines)-200:]
	}
	return strings.Join(lines, "\n")
}

var (
	accelOnce sync.Once
	accel     string
)

// accelerator is kvm when a guest boots with it on this host, and tcg
// (software emulation) otherwise; /dev/kvm can be there and a KVM guest
// still hang before its kernel prints anything. The answer is kept in
// bin/guest/accel for the host's boot, so that one probe serves every
// test package.
func accelerator(t *testing.T, kernel, initrd string) string {
	accelOnce.Do(func() {
		bootID, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
		cache := filepath.Join(filepath.Dir(filepath.Dir(kernel)), "accel")
		if data, err := os.ReadFile(cache); err == nil {
			if id, a, ok := strings.Cut(strings.TrimSpace(string(data)), " "); ok && id == strings.TrimSpace(string(bootID)) {
				accel = a
				return
			}
		}
		accel = probeKVM(kernel, initrd)
		_ = os.WriteFile(cache, []byte(strings.TrimSpace(string(bootID))+" "+accel+"\n"), 0o644)
	})
	t.Logf("the guest runs with %s", accel)
	return accel
}

// probeKVM boots the bare guest (it has no test, so its init ends at
// once) with KVM, and says whether it came to its end.
func probeKVM(kernel, initrd string) string {
	if _, err := os.Stat("/dev/kvm"); err != nil {
		return "tcg"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	dir, err := os.MkdirTemp("", "strata-kvm-probe-")
	if err != nil {
		return "tcg"
	}
	defer os.RemoveAll(dir)
	m := &machine{name: "probe", dir: dir, kernel: kernel, initrd: initrd, o: Options{MemoryMiB: 512}}
	args, err := m.args("kvm")
	if err != nil {
		return "tcg"
	}
	cmd := exec.CommandContext(ctx, "qemu-system-x86_64", args...)
	cmd.Stderr = io.Discard
	out, _ := cmd.Output()
	if bytes.Contains(out, []byte(exitMark)) {
		return "kvm"
	}
	return "tcg"
}

// logPath is where a machine's test output is copied while it runs.
func logPath(t *testing.T, name string) string {
	dir := filepath.Join(testenv.RepoRoot(), "bin", "guest", "logs")
	_ = os.MkdirAll(dir, 0o755)
	return filepath.Join(dir, strings.ReplaceAll(t.Name(), "/", "-")+"-"+name+".log")
}
