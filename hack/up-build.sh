#!/usr/bin/env bash
# make up's build plan: everything `strata up` runs, for this machine's
# architecture only, in two lanes side by side. Each lane's go builds
# schedule their packages on all cores, so two lanes keep 2 cores busy
# through the gaps one leaves (downloads, single-threaded links) without
# the dozen compilers at once of building everything together.
#   Kubernetes: etcd, kube-apiserver, the controller manager, the
#     scheduler, kube-proxy, kubectl and the kubelet in one module; the
#     registry. (The chart is installed with Helm's SDK: no helm program.)
#   strata: bin/strata and bin/strata-node; the CSI sidecars; the local
#     release (which links strata again from the same compile).
# MinIO, which the cluster does not need to become Ready (only the
# example's Bucket does), is left to strata up, which builds it while the
# nodes start strata.
# Every step is skipped when its result is there, so a second make up
# builds nothing. Each step's output goes to bin/build-logs/STEP.log; its
# time is printed as it ends.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
LOGS="$ROOT/bin/build-logs"
mkdir -p "$LOGS"
start=$SECONDS

clock() {
  local s=$((SECONDS - start))
  printf '%d:%02d' $((s / 60)) $((s % 60))
}

# step NAME COMMAND... runs a step, its output in its log, and says how
# long it took; a failure prints the log's end.
step() {
  local name="$1" began=$SECONDS
  shift
  if ! "$@" >"$LOGS/$name.log" 2>&1; then
    echo "✗ build $(clock)  $name failed (its log: $LOGS/$name.log):" >&2
    tail -n 30 "$LOGS/$name.log" >&2
    return 1
  fi
  printf '► build %5s  %-14s %3ds\n' "$(clock)" "$name" $((SECONDS - began))
}

kubernetes_lane() {
  step control-plane bash "$ROOT/hack/control-plane.sh" nodes
  step registry bash "$ROOT/hack/tools.sh" registry
}

strata_lane() {
  step strata make -C "$ROOT" --no-print-directory build
  step sidecars bash "$ROOT/hack/sidecars.sh" "$(go env GOARCH)"
  step release "$ROOT/bin/strata" up --release-only --source-dir "$ROOT" --bin-dir "$ROOT/bin"
}

echo "► build  0:00  two lanes: Kubernetes and the registry, then strata and its release (logs in $LOGS)"
kubernetes_lane &
k8s=$!
strata_lane &
strata=$!
status=0
wait "$k8s" || status=1
wait "$strata" || status=1
[ "$status" = 0 ] || exit 1
echo "► build $(clock)  done"
