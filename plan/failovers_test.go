package plan_test

import (
	"maps"
	"strings"
	"testing"
)

// replicated is an app wired for failover: two btrfs classes, a static
// volume pinned to each node, a claim on each, the Deployment on the
// primary claim, the VolSync pair and the Failover.
func replicated() map[string]string {
	ks := `apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: replicated
  namespace: flux-system
spec:
  interval: 10m
  path: ./replicated
  prune: true
  dependsOn:
    - name: infrastructure
  sourceRef:
    kind: GitRepository
    name: flux-system
`
	side := func(name, node, size string) string {
		return `apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: btrfs-` + node + `
provisioner: strata.csi.strata.dev
parameters:
  agentURL: https://` + node + `:8420
---
apiVersion: v1
kind: PersistentVolume
metadata:
  name: pv-` + name + `
spec:
  capacity:
    storage: ` + size + `
  accessModes: [ReadWriteOnce]
  storageClassName: btrfs-` + node + `
  csi:
    driver: strata.csi.strata.dev
    volumeHandle: btrfs-` + node + `|` + name + `
  nodeAffinity:
    required:
      nodeSelectorTerms:
        - matchExpressions:
            - {key: kubernetes.io/hostname, operator: In, values: [` + node + `]}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: ` + name + `
  namespace: databases
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: btrfs-` + node + `
  volumeName: pv-` + name + `
  resources:
    requests:
      storage: ` + size + `
`
	}
	return map[string]string{
		"clusters/homelab/replicated.yaml": ks,
		"replicated/primary.yaml":          side("pvc-notes", "node-1", "10Gi"),
		"replicated/backup.yaml":           side("pvc-notes-backup", "node-2", "10Gi"),
		"replicated/app.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: notes
  namespace: databases
spec:
  selector:
    matchLabels: {app: notes}
  template:
    metadata:
      labels: {app: notes}
    spec:
      containers:
        - {name: notes, image: example-app}
      volumes:
        - name: data
          persistentVolumeClaim: {claimName: pvc-notes}
`,
		"replicated/pair.yaml": `apiVersion: volsync.backube/v1alpha1
kind: ReplicationDestination
metadata:
  name: notes-backup
  namespace: databases
spec:
  external:
    provider: strata.dev/btrfs
    parameters: {destinationPVC: pvc-notes-backup}
---
apiVersion: volsync.backube/v1alpha1
kind: ReplicationSource
metadata:
  name: notes
  namespace: databases
spec:
  sourcePVC: pvc-notes
  trigger: {schedule: "*/5 * * * *"}
  external:
    provider: strata.dev/btrfs
    parameters: {destination: notes-backup}
`,
		"replicated/failover.yaml": `apiVersion: failover.strata.dev/v1alpha1
kind: Failover
metadata:
  name: notes
  namespace: databases
spec:
  workload: {kind: Deployment, name: notes}
  primary: {node: node-1, claim: pvc-notes}
  backup: {node: node-2, claim: pvc-notes-backup}
  replication: {source: notes, destination: notes-backup}
`,
	}
}

func TestFailoverPairsAreChecked(t *testing.T) {
	good := replicated()
	with := func(name, old, new string) map[string]string {
		files := maps.Clone(good)
		maps.Copy(files, editIn(t, good, name, old, new))
		return files
	}
	without := func(name string) map[string]string {
		files := maps.Clone(good)
		delete(files, name)
		return files
	}
	cases := []struct {
		name  string
		files map[string]string
		want  []string // fragments of the plan's errors; none for a good pair
	}{
		{"a good pair", good, nil},
		{"both sides on one node", with("replicated/failover.yaml", "backup: {node: node-2", "backup: {node: node-1"),
			[]string{"both on node node-1", "volume pv-pvc-notes-backup of the backup claim pvc-notes-backup is not pinned to node node-1"}},
		{"a claim missing from the revision", without("replicated/backup.yaml"),
			[]string{"the backup claim databases/pvc-notes-backup is not in this revision"}},
		{"a smaller backup", with("replicated/backup.yaml", "storage: 10Gi", "storage: 5Gi"),
			[]string{"backup claim pvc-notes-backup (5Gi) is smaller than primary claim pvc-notes (10Gi)"}},
		{"a class the pair's mover does not replicate", with("replicated/backup.yaml", "  agentURL: https://node-2:8420\n", "  deviceClass: nvme\n"),
			[]string{"the backup claim pvc-notes-backup is on StorageClass btrfs-node-2, an LVM class, which strata.dev/btrfs does not replicate: set spec.external.provider strata.dev/lvm"}},
		{"a class of another driver", with("replicated/backup.yaml", "provisioner: strata.csi.strata.dev", "provisioner: rancher.io/local-path"),
			[]string{"StorageClass btrfs-node-2 of rancher.io/local-path: strata's movers replicate strata's volumes"}},
		{"a node-local class on another node", with("replicated/backup.yaml", "  agentURL: https://node-2:8420\n", "  agentURL: https://node-2:8420\n  hostNode: node-3\n"),
			[]string{"the backup claim pvc-notes-backup is on StorageClass btrfs-node-2, whose volumes are on node node-3 (hostNode), not on the backup node node-2"}},
		{"a workload on another claim", with("replicated/app.yaml", "claimName: pvc-notes}", "claimName: scratch}"),
			[]string{"Deployment notes uses neither the primary claim pvc-notes nor the backup claim pvc-notes-backup"}},
		{"a source of another claim", with("replicated/pair.yaml", "sourcePVC: pvc-notes", "sourcePVC: pvc-other"),
			[]string{"ReplicationSource notes replicates claim pvc-other, not the primary claim pvc-notes"}},
		{"replication missing from the revision", without("replicated/pair.yaml"),
			[]string{"ReplicationSource databases/notes is not in this revision", "ReplicationDestination databases/notes-backup is not in this revision"}},
	}
	r := newRepo(t, fixture())
	for i, tc := range cases {
		r.branch(branchName(i), tc.files)
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := run(t, r, branchName(i), false)
			errors := strings.Join(p.Errors, "\n")
			if tc.want == nil && len(p.Errors) > 0 {
				t.Fatalf("a good pair got errors:\n%s", errors)
			}
			for _, w := range tc.want {
				if !strings.Contains(errors, "Failover databases/notes: ") || !strings.Contains(errors, w) {
					t.Errorf("errors lack %q:\n%s", w, errors)
				}
			}
		})
	}
}
