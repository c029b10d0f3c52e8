#!/usr/bin/env bash
# Installs the control-plane binaries that envtest and `strata up` use:
# etcd from Debian's etcd-server package and kube-apiserver built from the Go
# module proxy (no release downloads are reachable here). Idempotent: every
# step is skipped when its result is already present.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BIN="$ROOT/bin/k8s"
K8S_VERSION="${K8S_VERSION:-1.36.3}"
# The kubelet is three minors behind the API server, within the supported
# skew: 1.35 and later refuse cgroup v1 hosts, and this machine has only v1
# (docs/development.md, "The local cluster").
KUBELET_VERSION="${KUBELET_VERSION:-1.34.4}"
mkdir -p "$BIN"

say() { echo "control-plane: $*" >&2; }

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

install_etcd() {
  if [ -x "$BIN/etcd" ]; then return; fi
  if ! command -v etcd >/dev/null && [ ! -x /usr/bin/etcd ]; then
    say "installing Debian package etcd-server"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q etcd-server >/dev/null ||
      { as_root apt-get update -q >/dev/null && as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q etcd-server >/dev/null; }
    # The package starts a system etcd on :2379; tests run their own.
    as_root systemctl disable --now etcd >/dev/null 2>&1 || true
    as_root pkill -x etcd >/dev/null 2>&1 || true
  fi
  ln -sf "$(command -v etcd || echo /usr/bin/etcd)" "$BIN/etcd"
  say "etcd ready: $("$BIN/etcd" --version | head -1)"
}

# k8s.io/kubernetes replaces its staging modules with ./staging/... paths,
# which do not exist in the module cache; point each at its published version.
staging_replaces() {
  local version="$1" gomod
  gomod="$(go mod download -json "k8s.io/kubernetes@v$version" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')"
  grep -E '^\s*k8s.io/[a-z0-9-]+ => ./staging/' "$gomod" | awk '{print $1}' |
    while read -r m; do echo "replace $m => $m v0.${version#1.}"; done
}

# build_k8s_cmd NAME [VERSION] builds k8s.io/kubernetes/cmd/NAME into bin/k8s.
build_k8s_cmd() { build_k8s "$1" "${2:-$K8S_VERSION}" "k8s.io/kubernetes/cmd/$1" "$BIN/$1"; }

# build_k8s NAME VERSION PACKAGE OUT builds a package of k8s.io/kubernetes
# into OUT: a command, or with TEST=1 a test binary (go test -c).
build_k8s() {
  local name="$1" version="$2" pkg="$3" out="$4"
  if [ -x "$out" ]; then return; fi
  mkdir -p "$(dirname "$out")"
  say "building $name v$version from the Go module proxy (first time only, several minutes on 2 cores)"
  local work status=0
  work="$(mktemp -d)"
  (
    cd "$work"
    go mod init "strata.local/$name" >/dev/null 2>&1
    go mod edit -require "k8s.io/kubernetes@v$version"
    staging_replaces "$version" >>go.mod
    printf 'package main\nimport _ "%s"\nfunc main() {}\n' "$pkg" >tools.go
    GOFLAGS=-mod=mod go mod tidy >/dev/null 2>&1 || true
    # The node's components say their version (kubectl get nodes shows the
    # kubelet's); the API server keeps the build's own, which envtest reads.
    local ldflags=""
    case "$name" in kube-apiserver | kubectl) ;; *)
      ldflags="-X k8s.io/component-base/version.gitVersion=v$version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$(echo "$version" | cut -d. -f2)" ;;
    esac
    if [ "${TEST:-}" = 1 ]; then
      GOFLAGS=-mod=mod go test -c -o "$out.tmp" "$pkg"
    else
      # No debug information: these are run, not debugged, and leaving it
      # out takes a good part of each compile and link on a fresh machine.
      CGO_ENABLED="${CGO_ENABLED:-1}" GOFLAGS=-mod=mod go build -gcflags=all=-dwarf=false -ldflags "-s -w $ldflags" -o "$out.tmp" "$pkg"
    fi
  ) || status=$?
  # Removed here, not by a RETURN trap: a trap stays set after the
  # function and fires, with $work gone, when its caller returns.
  rm -rf "$work"
  [ "$status" = 0 ] || return "$status"
  mv "$out.tmp" "$out"
  say "$name ready"
}

# The kubelet alone (`hack/control-plane.sh kubelet`): a version of its own,
# so `make up` builds it beside the control plane rather than after it.
if [ "${1:-}" = kubelet ]; then
  build_k8s_cmd kubelet "$KUBELET_VERSION"
  echo "$BIN"
  exit 0
fi
install_etcd
build_k8s_cmd kube-apiserver
# The local cluster (`strata up`, the end-to-end suite): `hack/control-plane.sh
# nodes`; `cluster` is the same without the kubelet.
if [ "${1:-}" = nodes ] || [ "${1:-}" = cluster ]; then
  build_k8s_cmd kube-controller-manager
  build_k8s_cmd kube-scheduler
  build_k8s_cmd kube-proxy
  [ "$1" = cluster ] || build_k8s_cmd kubelet "$KUBELET_VERSION"
  build_k8s_cmd kubectl
fi
# Kubernetes' storage e2e against strata's driver (`make conformance`): the
# e2e.test binary and agnhost, the image most of its pods run.
if [ "${1:-}" = conformance ]; then
  TEST=1 build_k8s e2e.test "$K8S_VERSION" k8s.io/kubernetes/test/e2e "$ROOT/bin/conformance/e2e.test"
  CGO_ENABLED=0 build_k8s agnhost "$K8S_VERSION" k8s.io/kubernetes/test/images/agnhost "$ROOT/bin/conformance/agnhost"
fi
# The plan benchmark's reference (`hack/control-plane.sh kubectl`): a kubectl
# of the same version, built the same way, not a distribution's wrapper.
if [ "${1:-}" = kubectl ]; then build_k8s_cmd kubectl; fi
echo "$BIN"
