#!/usr/bin/env bash
# Runs the benchmarks: strata plan on a generated repository beside a loop
# of kubectl kustomize (hack/planbench); the CSI driver's LVM backend beside
# the bare loop-device steps and its btrfs backend beside btrfs-progs
# (hack/csibench, root only); btrfs replication agent to agent beside
# btrfs send | btrfs receive, and the LVM mover beside a whole dd copy
# (hack/replbench, root only); image jobs beside
# a download plus qemu-img convert alone (hack/imagebench, root only); node loss to the app
# on the backup, against an API server and on the local cluster's nodes
# (root only); the Buildbarn controllers reconciling 50 installations
# (hack/bbbench); the dashboard's pages with 10,000 claims (hack/dashbench); then the engine on a local control plane,
# strata first, then Flux's kustomize-controller as the reference.
# Extra arguments go to hack/bench (see its flags); results are printed, and
# recorded by hand in docs/benchmarks.md with the command.
set -euo pipefail
cd "$(dirname "$0")/.."
export GOTOOLCHAIN=local
bash hack/flux.sh
bash hack/control-plane.sh kubectl >/dev/null
go run ./hack/planbench -strata bin/strata -kubectl bin/k8s/kubectl
go run ./hack/planbench -strata bin/strata -kubectl bin/k8s/kubectl -layout homelab -kustomizations 80 -changed 8
# Push-to-applied of a git commit, an OCI artifact and a bucket object, one receiver-driven path.
bash hack/tools.sh registry minio
go run ./hack/sourcebench -pushes 20
# HelmReleases' charts rendered from an HTTP chart repository, cold and warm cache, beside helm template.
bash hack/tools.sh helm
go run ./hack/planbench -strata bin/strata -helm bin/helm -helmreleases 80 -changed 8
go run ./hack/planbench -strata bin/strata -helm bin/helm -helmreleases 80 -changed 80
if [ "$(id -u)" = 0 ]; then
  bash hack/packages.sh
  go run ./hack/csibench
  go run ./hack/csibench -backend btrfs
  go run ./hack/replbench
  go run ./hack/replbench -mover lvm
  # btrfs volume creates through the agent's API beside the bare steps (issue #22's baseline).
  go run ./hack/volbench
  bash hack/tools.sh minio
  go run ./hack/imagebench
  # Replication and image jobs before and after their confinement (issue #39), in alternation.
  bash hack/confinebench.sh
  # Volume creates, replication and failover before and after the node agent's redesign (issue #40).
  bash hack/nodebench.sh
  go test -run '^$' -bench BenchmarkNodeLossToReady -benchtime 3x ./failover/controller
  # The same loss on the local cluster's real nodes, a real pod's start included.
  bash hack/sidecars.sh >/dev/null
  bash hack/tools.sh helm
  go test -run '^$' -bench BenchmarkNodeLossOnRealNodes -benchtime 1x -timeout 20m ./internal/testing/e2e
else
  echo "csibench skipped: it attaches loop devices and mounts, which needs root"
fi
# What the data-loss guard for Flux's prunes adds to a prune of 1000 ConfigMaps (issue #44).
go run ./hack/guardbench -rounds 10
# The dashboard with 1000 Kustomizations and 10,000 claims in the controller's caches (issue #45).
bash hack/packages.sh
go run ./hack/dashbench
# The Buildbarn controllers: 50 installations (250 components) to Ready.
go run ./hack/bbbench -installations 50 -strata bin/strata
# The engine renders the chart's finalizer policy with bin/helm.
bash hack/tools.sh helm
go run ./hack/bench -flux bin/flux/kustomize-controller -flux-defaults "$@"
