#!/usr/bin/env bash
# Regenerates the CRDs in charts/strata/crds from Go types with controller-gen.
# Flux's kinds come from Flux's own API modules, never from copies.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
OUT="$ROOT/charts/strata/crds"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
export GOTOOLCHAIN=local

"$ROOT/bin/controller-gen" crd \
  paths=github.com/fluxcd/source-controller/api/v1 \
  paths=github.com/fluxcd/kustomize-controller/api/v1 \
  paths=github.com/fluxcd/notification-controller/api/v1 \
  output:crd:dir="$TMP"

mkdir -p "$OUT"
# The source/v1 package also defines HelmChart and HelmRepository, which
# strata does not serve; ship only the kinds it reconciles or reads
# (ExternalArtifact: a Kustomization may build from one another controller
# writes).
for crd in source.toolkit.fluxcd.io_gitrepositories source.toolkit.fluxcd.io_ocirepositories source.toolkit.fluxcd.io_buckets \
  source.toolkit.fluxcd.io_externalartifacts kustomize.toolkit.fluxcd.io_kustomizations notification.toolkit.fluxcd.io_receivers; do
  cp "$TMP/$crd.yaml" "$OUT/$crd.yaml"
done
# Alert and Provider (v1beta3), which strata serves where Flux's
# notification-controller is not installed. Flux's Alert CRD lists only
# Flux's kinds as event sources; strata's kinds are added to that list, so
# an Alert may take a Failover's events.
"$ROOT/bin/controller-gen" crd \
  paths=github.com/fluxcd/notification-controller/api/v1beta3 \
  output:crd:dir="$TMP/v1beta3"
cp "$TMP/v1beta3/notification.toolkit.fluxcd.io_providers.yaml" "$OUT/"
STRATA_KINDS="Failover ReplicationSource ReplicationDestination LVMCluster LogicalVolume VolumeImage BuildbarnStorage BuildbarnScheduler BuildbarnWorker BuildbarnFrontend BuildbarnBrowser Node"
awk -v kinds="$STRATA_KINDS" '
  { print }
  /^ *- ExternalArtifact$/ {
    match($0, /^ */); pad = substr($0, 1, RLENGTH)
    n = split(kinds, k, " "); for (i = 1; i <= n; i++) print pad "- " k[i]
  }' "$TMP/v1beta3/notification.toolkit.fluxcd.io_alerts.yaml" >"$OUT/notification.toolkit.fluxcd.io_alerts.yaml"
grep -q -- "- Failover" "$OUT/notification.toolkit.fluxcd.io_alerts.yaml" || { echo "generate: strata's kinds not added to the Alert CRD" >&2; exit 1; }
# VolumeSnapshot and its kinds, from the external-snapshotter's API module:
# the chart ships them for clusters that have no snapshot CRDs yet (Helm
# leaves CRDs that are there alone).
"$ROOT/bin/controller-gen" crd \
  paths=github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1 \
  output:crd:dir="$OUT"
# A CRD in a *.k8s.io group must name the API review that approved it; the
# API server refuses it otherwise. This is the snapshot API's.
for crd in "$OUT"/snapshot.storage.k8s.io_*.yaml; do
  sed -i 's|^  annotations:$|  annotations:\n    api-approved.kubernetes.io: "https://github.com/kubernetes-csi/external-snapshotter/pull/814"|' "$crd"
done
if ls "$ROOT"/api/*/v1alpha1/*.go >/dev/null 2>&1; then
  "$ROOT/bin/controller-gen" object paths="$ROOT/api/..."
  "$ROOT/bin/controller-gen" crd paths="$ROOT/api/..." output:crd:dir="$OUT"
fi
echo "generate: CRDs written to ${OUT#$ROOT/}" >&2
