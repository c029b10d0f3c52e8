#!/usr/bin/env bash
# Builds the Kubernetes CSI sidecars strata's driver runs with, from the Go
# module proxy into bin/sidecars (no image registry is reachable here):
# csi-provisioner, csi-attacher, csi-snapshotter and snapshot-controller.
# node-driver-registrar and csi-resizer are not served by the proxy; strata
# does their work itself (docs/csi.md). Each is built in a scratch module
# that requires the sidecar's module with that module's own replace
# directives, as `go install` refuses modules that have them. Idempotent.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BIN="$ROOT/bin/sidecars"
mkdir -p "$BIN"
say() { echo "sidecars: $*" >&2; }

# build NAME MODULE VERSION: MODULE/cmd/NAME at VERSION into bin/sidecars.
build() {
  local name="$1" module="$2" version="$3"
  if [ -x "$BIN/$name" ]; then return; fi
  say "building $name $version from the Go module proxy (first time only)"
  local work gomod
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' RETURN
  gomod="$(go mod download -json "$module@$version" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')"
  (
    cd "$work"
    go mod init "strata.local/$name" >/dev/null 2>&1
    go mod edit -require "$module@$version"
    # Replaces to published versions carry over; one to a folder of the
    # module itself (./client) names that folder's own published module.
    grep -E '^replace .* => [^.].* v[0-9]' "$gomod" >>go.mod || true
    { grep -E '^replace .* => \./' "$gomod" || true; } | while read -r _ path _ _; do
      echo "replace $path => $path ${version}"
    done >>go.mod
    printf 'package main\nimport _ "%s/cmd/%s"\n' "$module" "$name" >tools.go
    GOFLAGS=-mod=mod go mod tidy >/dev/null 2>&1 || true
    CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -o "$BIN/$name.tmp" "$module/cmd/$name"
  )
  mv "$BIN/$name.tmp" "$BIN/$name"
  say "$name ready"
}

build csi-provisioner github.com/kubernetes-csi/external-provisioner/v6 v6.4.0
build csi-attacher github.com/kubernetes-csi/external-attacher/v4 v4.13.0
build csi-snapshotter github.com/kubernetes-csi/external-snapshotter/v8 v8.7.0
build snapshot-controller github.com/kubernetes-csi/external-snapshotter/v8 v8.7.0
echo "$BIN"
