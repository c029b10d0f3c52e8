#!/usr/bin/env bash
# Builds the Kubernetes CSI sidecars strata's driver runs with (listed in
# hack/sidecars.txt), from the Go module proxy into bin/sidecars/ARCH for
# each architecture given (default: amd64 and arm64), for the release
# (docs/release.md); no image registry is reachable here.
# node-driver-registrar and csi-resizer are not served by the proxy; strata
# does their work itself (docs/csi.md). They are built in a scratch module
# that requires the sidecars' modules with those modules' own replace
# directives, as `go install` refuses modules that have them. Idempotent.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
say() { echo "sidecars: $*" >&2; }

# The sidecars, as NAME MODULE VERSION.
mapfile -t SIDECARS < <(grep -v '^#' "$ROOT/hack/sidecars.txt" | awk 'NF {print $1, $2, $3}')

# replaces MODULE VERSION prints the module's replace directives as this
# scratch module needs them: replaces to published versions carry over;
# one to a folder of the module itself (./client) names that folder's own
# published module.
replaces() {
  local module="$1" version="$2" gomod
  gomod="$(go mod download -json "$module@$version" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')"
  grep -E '^replace .* => [^.].* v[0-9]' "$gomod" | awk '{print $2, $4, $5}' || true
  { grep -E '^replace .* => \./' "$gomod" || true; } | while read -r _ path _ _; do
    echo "$path $path $version"
  done
}

# All sidecars are built in one scratch module by one `go build`, so the
# libraries they share (client-go, gRPC, the CSI spec) compile once: on a
# fresh machine that is minutes of the first `make up`. Where two
# sidecars replace the same module, the newer version is taken.
build() {
local arch="$1" BIN="$ROOT/bin/sidecars/$1"
mkdir -p "$BIN"
missing=()
for s in "${SIDECARS[@]}"; do
  read -r name _ _ <<<"$s"
  [ -x "$BIN/$name" ] || missing+=("$s")
done
if [ "${#missing[@]}" -gt 0 ]; then
  say "building ${#missing[@]} sidecars for $arch from the Go module proxy (first time only, a few minutes on 2 cores)"
  work="$(mktemp -d)"
  (
    cd "$work"
    go mod init strata.local/sidecars >/dev/null 2>&1
    for s in "${missing[@]}"; do
      read -r name module version <<<"$s"
      go mod edit -require "$module@$version"
      replaces "$module" "$version"
    done | sort -k1,1 -k3,3V | awk '{latest[$1] = $2 " " $3} END {for (p in latest) print "replace " p " => " latest[p]}' >>go.mod
    for s in "${missing[@]}"; do
      read -r name module _ <<<"$s"
      echo "import _ \"$module/cmd/$name\""
    done | { echo "package main"; cat; } >tools.go
    GOFLAGS=-mod=mod go mod tidy >/dev/null 2>&1 || true
    mkdir out
    for s in "${missing[@]}"; do read -r name module _ <<<"$s"; echo "$module/cmd/$name"; done >pkgs
    # shellcheck disable=SC2046 # one package path per line
    # No debug information, as for the Kubernetes binaries.
    CGO_ENABLED=0 GOOS=linux GOARCH="$arch" GOFLAGS=-mod=mod go build -trimpath -gcflags=all=-dwarf=false -ldflags "-s -w -buildid=" -o out/ $(cat pkgs)
  )
  for s in "${missing[@]}"; do
    read -r name _ _ <<<"$s"
    mv "$work/out/$name" "$BIN/$name"
    say "$name ready for $arch"
  done
  rm -rf "$work"
fi
echo "$BIN"
}

[ "$#" -gt 0 ] || set -- amd64 arm64
for arch in "$@"; do build "$arch"; done
