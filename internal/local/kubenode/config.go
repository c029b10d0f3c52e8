package kubenode

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/template"
)

// containerdConfig keeps all of a node's runtime state under its
// directory, with its own socket, and uses this machine's CNI plugins
// with the node's own network list. restrict_oom_score_adj keeps every
// container's OOM score at or above containerd's own: the kubelet asks
// -998 for sandboxes, which only a process with CAP_SYS_RESOURCE may set,
// and a sandboxed development machine may withhold that capability. Pod
// network namespaces are kept under the node's state, so that a node's
// removal finds and unmounts them.
var containerdConfig = template.Must(template.New("containerd").Parse(`version = 2
root = "{{.Dir}}/containerd"
state = "{{.Dir}}/run/containerd"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs", "io.containerd.tracing.processor.v1.otlp"]

[grpc]
  address = "{{.Dir}}/run/containerd/containerd.sock"

[ttrpc]
  address = "{{.Dir}}/run/containerd/containerd-ttrpc.sock"

[plugins."io.containerd.internal.v1.opt"]
  path = "{{.Dir}}/opt"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{{.Pause}}"
  enable_unprivileged_ports = true
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "{{.Dir}}/cni"
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "{{.Dir}}/certs.d"
`))

// registryHosts tells containerd to reach the cluster's registry over
// plain HTTP, for pulls only.
var registryHosts = template.Must(template.New("hosts").Parse(`server = "http://{{.Registry}}"

[host."http://{{.Registry}}"]
  capabilities = ["pull", "resolve"]
`))

// cniConfig gives each pod an address of the node's range on the node's
// own bridge; the routes between nodes carry pod traffic across.
var cniConfig = template.Must(template.New("cni").Parse(`{
  "cniVersion": "0.4.0",
  "name": "strata",
  "plugins": [
    {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": "{{.PodCIDR}}"}]], "routes": [{"dst": "0.0.0.0/0"}],
              "dataDir": "{{.Dir}}/run/cni-ipam"}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`))

// kubeletConfig: cgroupfs under the node's own cgroup root, and the
// kubelet's API on the node's address only, on the cluster's private
// network, open to any client there: the API server reaches it for logs
// and exec without a client certificate of its own. Status is reported
// every 4 s so that a lost node is noticed in seconds, and pods are
// synced every 10 s, so that a grown volume's filesystem is grown soon.
// Volumes are measured every 10 s (not each minute), so that the
// dashboard shows what a claim uses soon after its pod starts. The
// kubelet runs on a cgroup v1 host, which it refuses from 1.35 on unless
// failCgroupV1 is false.
var kubeletConfig = template.Must(template.New("kubelet").Parse(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
cgroupRoot: /{{.Name}}
containerRuntimeEndpoint: unix://{{.Dir}}/run/containerd/containerd.sock
failSwapOn: false
failCgroupV1: false
oomScoreAdj: 0
address: {{.IP}}
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
authorization: {mode: AlwaysAllow}
clusterDomain: cluster.local
resolvConf: /etc/resolv.conf
volumePluginDir: {{.Dir}}/kubelet/volume-plugins
serializeImagePulls: false
nodeStatusUpdateFrequency: 4s
syncFrequency: 10s
nodeStatusReportFrequency: 4s
volumeStatsAggPeriod: 10s
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: 100Mi, nodefs.available: 1%, imagefs.available: 1%, nodefs.inodesFree: 1%}
`))

var proxyConfig = template.Must(template.New("proxy").Parse(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: {{.Dir}}/kube-proxy/kubeconfig}
hostnameOverride: {{.Name}}
mode: iptables
clusterCIDR: {{.PodPrefix}}
bindAddress: {{.IP}}
metricsBindAddress: 127.0.0.1:10249
healthzBindAddress: 127.0.0.1:10256
conntrack: {maxPerCore: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
`))

// writeConfig writes every configuration file of the node.
func (n *Node) writeConfig() error {
	data := map[string]any{
		"Name": n.o.Name, "Dir": n.o.Dir, "IP": n.IP(), "Pause": n.o.PauseImage, "Registry": n.o.Registry,
		"PodCIDR": n.o.Network.PodCIDR(n.o.Index), "PodPrefix": n.o.Network.PodPrefix,
	}
	type configFile struct {
		path string
		tmpl *template.Template
		raw  []byte
	}
	files := []configFile{
		{path: "containerd.toml", tmpl: containerdConfig},
		{path: "cni/10-strata.conflist", tmpl: cniConfig},
		{path: "kubelet/config.yaml", tmpl: kubeletConfig},
		{path: "kubelet/kubeconfig", raw: n.o.Kubeconfig},
		{path: "kube-proxy.yaml", tmpl: proxyConfig},
		{path: "kube-proxy/kubeconfig", raw: n.o.ProxyKubeconfig},
	}
	for _, host := range append([]string{n.o.Registry}, n.o.RegistryNames...) {
		files = append(files, configFile{path: filepath.Join("certs.d", host, "hosts.toml"), tmpl: registryHosts})
	}
	for _, f := range files {
		content := f.raw
		if f.tmpl != nil {
			var b bytes.Buffer
			if err := f.tmpl.Execute(&b, data); err != nil {
				return err
			}
			content = b.Bytes()
		}
		if err := writeFile(n.path(f.path), content); err != nil {
			return fmt.Errorf("node %s: %w", n.o.Name, err)
		}
	}
	return nil
}

func (n *Node) kubeletArgs() []string {
	args := []string{
		"--config", n.path("kubelet", "config.yaml"),
		"--kubeconfig", n.path("kubelet", "kubeconfig"),
		"--cert-dir", n.path("kubelet", "pki"),
		"--hostname-override", n.o.Name,
		"--node-ip", n.IP().String(),
		"--v", "1",
	}
	if len(n.o.Labels) > 0 {
		labels := make([]string, 0, len(n.o.Labels))
		for k, v := range n.o.Labels {
			labels = append(labels, k+"="+v)
		}
		slices.Sort(labels) // the same flags each start
		args = append(args, "--node-labels", strings.Join(labels, ","))
	}
	return args
}

func writeFile(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o600)
}
