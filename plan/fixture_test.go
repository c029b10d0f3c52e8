package plan_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-gitops/strata/internal/local/gitserver"
)

// fixture is a cluster repository in the layout `flux bootstrap` leaves:
// clusters/homelab holds the Kustomizations, each pointing at a directory
// of the repository, chained infrastructure -> storage -> apps.
func fixture() map[string]string {
	ks := func(name, path, deps, extra string) string {
		s := fmt.Sprintf(`apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: %s
  namespace: flux-system
spec:
  interval: 10m
  path: %s
  prune: true
  sourceRef:
    kind: GitRepository
    name: flux-system
`, name, path)
		if deps != "" {
			s += "  dependsOn:\n"
			for _, d := range strings.Split(deps, ",") {
				s += "    - name: " + d + "\n"
			}
		}
		return s + extra
	}
	return map[string]string{
		"clusters/homelab/infrastructure.yaml": ks("infrastructure", "./infrastructure", "", ""),
		"clusters/homelab/storage.yaml":        ks("storage", "./storage", "infrastructure", ""),
		"clusters/homelab/apps.yaml": ks("apps", "./apps", "storage", `  postBuild:
    substitute:
      db_size: 20Gi
    substituteFrom:
      - kind: ConfigMap
        name: cluster-vars
`),
		"clusters/homelab/podinfo.yaml": `apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: podinfo
  namespace: flux-system
spec:
  interval: 10m
  path: ./kustomize
  prune: true
  sourceRef:
    kind: OCIRepository
    name: podinfo
`,
		"infrastructure/namespaces.yaml": `apiVersion: v1
kind: Namespace
metadata:
  name: databases
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: cluster-vars
  namespace: flux-system
data:
  cluster_name: homelab
`,
		"clusters/homelab/monitoring.yaml": ks("monitoring", "./monitoring", "", ""),
		"monitoring/dashboards.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: dashboards
  namespace: flux-system
data:
  storage.json: "{}"
`,
		"infrastructure/lvmcluster.yaml": `apiVersion: storage.strata.dev/v1alpha1
kind: LVMCluster
metadata:
  name: local
spec:
  storage:
    deviceClasses:
      - name: nvme
        default: true
        fstype: xfs
        deviceSelector:
          paths: [/dev/nvme0n1, /dev/nvme1n1]
        thinPoolConfig:
          name: thin
          sizePercent: 90
          overprovisionRatio: 10
`,
		"storage/storageclass.yaml": `apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: local-retain
provisioner: kubernetes.io/no-provisioner
reclaimPolicy: Retain
volumeBindingMode: WaitForFirstConsumer
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: thin
provisioner: strata.csi.strata.dev
allowVolumeExpansion: true
parameters:
  deviceClass: nvme
`,
		"storage/pv.yaml": `apiVersion: v1
kind: PersistentVolume
metadata:
  name: node-1-nvme1
spec:
  claimRef:
    namespace: databases
    name: db-data
  capacity:
    storage: 100Gi
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  storageClassName: local-retain
  local:
    path: /mnt/disks/nvme1
  nodeAffinity:
    required:
      nodeSelectorTerms:
        - matchExpressions:
            - {key: kubernetes.io/hostname, operator: In, values: [node-1]}
`,
		"apps/db.yaml": `apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: db-data
  namespace: databases
  labels:
    cluster: ${cluster_name}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: local-retain
  volumeName: node-1-nvme1
  resources:
    requests:
      storage: ${db_size}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: cache
  namespace: databases
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: thin
  resources:
    requests:
      storage: 5Gi
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: db
  namespace: databases
spec:
  replicas: 1
  selector:
    matchLabels: {app: db}
  template:
    metadata:
      labels: {app: db}
    spec:
      containers:
        - name: db
          image: postgres:17
      volumes:
        - name: data
          persistentVolumeClaim: {claimName: db-data}
---
apiVersion: v1
kind: Secret
metadata:
  name: db-credentials
  namespace: databases
stringData:
  username: admin
  password: hunter2
`,
	}
}

// repo is a git repository with deterministic commit hashes.
type repo struct {
	t   *testing.T
	dir string
}

func newRepo(t *testing.T, files map[string]string) *repo {
	t.Helper()
	for _, kv := range [][2]string{{"GIT_AUTHOR_DATE", "2026-01-01T00:00:00Z"}, {"GIT_COMMITTER_DATE", "2026-01-01T00:00:00Z"},
		{"GIT_AUTHOR_NAME", "fixture"}, {"GIT_AUTHOR_EMAIL", "fixture@strata.dev"},
		{"GIT_COMMITTER_NAME", "fixture"}, {"GIT_COMMITTER_EMAIL", "fixture@strata.dev"}} {
		t.Setenv(kv[0], kv[1])
	}
	r := &repo{t: t, dir: t.TempDir()}
	r.git("init", "-q", "-b", "main")
	r.commit("base", files)
	return r
}

func (r *repo) git(args ...string) string {
	r.t.Helper()
	out, err := gitserver.Run(r.dir, args...)
	if err != nil {
		r.t.Fatal(err)
	}
	return out
}

// commit writes files (an empty content deletes the file) and commits.
func (r *repo) commit(message string, files map[string]string) string {
	r.t.Helper()
	for name, content := range files {
		r.write(name, content)
	}
	r.git("add", "-A")
	r.git("commit", "-q", "--allow-empty", "-m", message)
	return r.git("rev-parse", "HEAD")
}

// write writes a file of the working tree; "" removes it.
func (r *repo) write(name, content string) {
	r.t.Helper()
	p := filepath.Join(r.dir, name)
	if content == "" {
		if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
			r.t.Fatal(err)
		}
		return
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		r.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		r.t.Fatal(err)
	}
}

// branch commits files on a new branch from main and returns to main.
func (r *repo) branch(name string, files map[string]string) {
	r.t.Helper()
	r.git("checkout", "-q", "-b", name, "main")
	r.commit(name, files)
	r.git("checkout", "-q", "main")
}

// edit returns the fixture file with old replaced by new, failing when
// old is not there.
func edit(t *testing.T, name, old, new string) map[string]string {
	t.Helper()
	return editIn(t, fixture(), name, old, new)
}

// editIn is edit over any set of files.
func editIn(t *testing.T, files map[string]string, name, old, new string) map[string]string {
	t.Helper()
	content := files[name]
	if !strings.Contains(content, old) {
		t.Fatalf("fixture %s has no %q", name, old)
	}
	return map[string]string{name: strings.Replace(content, old, new, 1)}
}
