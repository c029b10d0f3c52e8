#!/usr/bin/env bash
# Builds Flux's kustomize-controller from the Go module proxy into bin/flux: the
# benchmark's measuring reference, and the Flux that the guard webhook's test
# (reconciler/guardwebhook) prunes with; it is never a dependency of strata.
# Same scratch-module trick as kube-apiserver: the controller's go.mod
# replaces its api submodule with ./api, which does not exist in the module
# cache, so point it at the published version and keep its other replace
# lines. Idempotent. Flux's source-controller is not built here: a module it
# needs is refused by the module proxy; its real binary comes from ../shared/flux
# (hack/tools.sh flux-controllers).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BIN="$ROOT/bin/flux"
KUSTOMIZE_CONTROLLER="${KUSTOMIZE_CONTROLLER:-v1.9.4}"
mkdir -p "$BIN"

say() { echo "flux: $*" >&2; }

# copied_replaces prints the replace directives of MODULE@VERSION's go.mod,
# with the ./api one pointed at the published api module.
copied_replaces() {
  local module="$1" version="$2" gomod
  gomod="$(go mod download -json "$module@$version" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')"
  awk -v version="$version" '
    /^replace \(/ { block = 1; next }
    block && /^\)/ { block = 0; next }
    /^replace / { sub(/^replace /, ""); line = 1 }
    block || line {
      if ($3 == "./api") print "replace " $1 " => " $1 " " version
      else print "replace " $0
      line = 0
    }' "$gomod"
}

build() {
  local name="$1" module="$2" version="$3"
  if [ -x "$BIN/$name" ]; then return; fi
  say "building $name $version from the Go module proxy (first time only)"
  local work
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' RETURN
  (
    cd "$work"
    go mod init strata.local/flux-bench >/dev/null 2>&1
    go mod edit -require "$module@$version"
    copied_replaces "$module" "$version" >>go.mod
    printf 'package main\nimport _ "%s"\n' "$module" >tools.go
    GOFLAGS=-mod=mod go mod tidy >/dev/null 2>&1 || true
    GOFLAGS=-mod=mod go build -o "$BIN/$name.tmp" "$module"
  )
  mv "$BIN/$name.tmp" "$BIN/$name"
  say "$name ready"
}

build kustomize-controller github.com/fluxcd/kustomize-controller "$KUSTOMIZE_CONTROLLER"
