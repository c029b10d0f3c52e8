package kubenode

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strings"
)

// Network is the layer-2 segment the nodes share: a bridge on the host
// with the host's address on it, and, per node, a veth pair whose inner
// end is the node's eth0 in its own network namespace.
type Network struct {
	// Bridge is the host bridge's name.
	Bridge string
	// Prefix is the segment, e.g. 10.77.0.0/24: the host takes its first
	// address, node i the (i+2)th.
	Prefix netip.Prefix
	// PodPrefix is split into one /24 per node, node i's being the
	// (i+1)th, e.g. 10.244.1.0/24 for node 0 of 10.244.0.0/16.
	PodPrefix netip.Prefix
}

// HostIP is the host's address on the segment, where the API server is
// reached from the nodes.
func (n Network) HostIP() netip.Addr { return n.Prefix.Addr().Next() }

// NodeIP is node i's address.
func (n Network) NodeIP(i int) netip.Addr {
	a := n.HostIP()
	for range i + 1 {
		a = a.Next()
	}
	return a
}

// PodCIDR is node i's pod range.
func (n Network) PodCIDR(i int) netip.Prefix {
	b := n.PodPrefix.Addr().As4()
	b[2] = byte(i + 1)
	return netip.PrefixFrom(netip.AddrFrom4(b), 24)
}

// Up makes the bridge and gives the host its address on it, once; the
// host forwards between nodes and routes to each node's pods.
func (n Network) Up(nodes int) error {
	if _, err := os.Stat("/sys/class/net/" + n.Bridge); err != nil {
		if err := ip("link", "add", n.Bridge, "type", "bridge"); err != nil {
			return err
		}
	}
	if err := ipIdempotent("addr", "add", fmt.Sprintf("%s/%d", n.HostIP(), n.Prefix.Bits()), "dev", n.Bridge); err != nil {
		return err
	}
	if err := ip("link", "set", n.Bridge, "up"); err != nil {
		return err
	}
	if err := os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0o644); err != nil {
		return fmt.Errorf("turning on IP forwarding: %w", err)
	}
	for i := range nodes {
		if err := ip("route", "replace", n.PodCIDR(i).String(), "via", n.NodeIP(i).String()); err != nil {
			return err
		}
	}
	return nil
}

// Down removes the bridge; the routes through it go with it.
func (n Network) Down() error {
	if _, err := os.Stat("/sys/class/net/" + n.Bridge); err != nil {
		return nil
	}
	return ip("link", "del", n.Bridge)
}

// plug makes node i's network namespace, if missing, and its link to the
// bridge: eth0 with the node's address, a default route through the
// host, routes to the other nodes' pods, and forwarding on.
func (n Network) plug(name string, i, nodes int) error {
	if _, err := os.Stat("/run/netns/" + name); err != nil {
		if err := ip("netns", "add", name); err != nil {
			return err
		}
	}
	host := hostLink(name)
	if _, err := os.Stat("/sys/class/net/" + host); err != nil {
		if err := ip("link", "add", host, "type", "veth", "peer", "name", "eth0", "netns", name); err != nil {
			return err
		}
	}
	steps := [][]string{
		{"link", "set", host, "master", n.Bridge},
		{"link", "set", host, "up"},
	}
	for _, s := range steps {
		if err := ip(s...); err != nil {
			return err
		}
	}
	in := func(args ...string) error { return ip(append([]string{"-n", name}, args...)...) }
	if err := ipIdempotent("-n", name, "addr", "add", fmt.Sprintf("%s/%d", n.NodeIP(i), n.Prefix.Bits()), "dev", "eth0"); err != nil {
		return err
	}
	for _, s := range [][]string{{"link", "set", "lo", "up"}, {"link", "set", "eth0", "up"},
		{"route", "replace", "default", "via", n.HostIP().String()}} {
		if err := in(s...); err != nil {
			return err
		}
	}
	for j := range nodes {
		if j != i {
			if err := in("route", "replace", n.PodCIDR(j).String(), "via", n.NodeIP(j).String()); err != nil {
				return err
			}
		}
	}
	return inNetns(name, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1", "net.ipv4.conf.all.route_localnet=1")
}

// hostLink is the host end of a node's veth pair.
func hostLink(node string) string { return "veth-" + node }

// cut takes the node's link to the bridge down: its processes run on and
// reach nothing outside the node, as in a network partition.
func cut(node string) error { return ip("link", "set", hostLink(node), "down") }

// mend brings the link up again.
func mend(node string) error { return ip("link", "set", hostLink(node), "up") }

// slow limits what reaches the node to mbit megabits a second, as a
// slow link would; 0 lifts the limit.
func slow(node string, mbit int) error {
	if mbit == 0 {
		return tc("qdisc", "del", "dev", hostLink(node), "root")
	}
	return tc("qdisc", "replace", "dev", hostLink(node), "root", "tbf", "rate", fmt.Sprintf("%dmbit", mbit), "burst", "64kb", "latency", "1s")
}

func tc(args ...string) error {
	if out, err := exec.Command("tc", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("tc %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// unplug removes the node's network namespace and its link.
func unplug(node string) error {
	if _, err := os.Stat("/sys/class/net/" + hostLink(node)); err == nil {
		if err := ip("link", "del", hostLink(node)); err != nil {
			return err
		}
	}
	if _, err := os.Stat("/run/netns/" + node); err == nil {
		return ip("netns", "del", node)
	}
	return nil
}

func ip(args ...string) error {
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// ipIdempotent is ip for a change that may be there already.
func ipIdempotent(args ...string) error {
	err := ip(args...)
	if err != nil && (strings.Contains(err.Error(), "File exists") || strings.Contains(err.Error(), "already assigned")) {
		return nil
	}
	return err
}

// inNetns runs a command in the node's network namespace only. (`ip
// netns exec` would give it a mount namespace of its own as well.)
func inNetns(node string, command ...string) error {
	cmd := netnsCommand(node, command...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s in node %s: %v: %s", strings.Join(command, " "), node, err, strings.TrimSpace(string(out)))
	}
	return nil
}

func netnsCommand(node string, command ...string) *exec.Cmd {
	return exec.Command("nsenter", append([]string{"--net=/run/netns/" + node, "--"}, command...)...)
}
