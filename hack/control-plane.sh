#!/usr/bin/env bash
# Installs the control-plane binaries that envtest and `strata up` use:
# kube-apiserver built from the Go module proxy (no release downloads are
# reachable here) and etcd built the same way, at the version that
# Kubernetes release requires. Idempotent: every step is skipped when its result
# is already present.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BIN="$ROOT/bin/k8s"
# Every component, the kubelet included, is of this version, built in one
# module: the kubelet runs on cgroup v1 hosts with failCgroupV1: false
# (docs/development.md, "The kubelet on cgroup v1 and containerd 1.6").
K8S_VERSION="${K8S_VERSION:-1.36.3}"
mkdir -p "$BIN"

say() { echo "control-plane: $*" >&2; }

# etcd is built at the version k8s.io/kubernetes itself requires: the API
# server's watch cache needs an etcd that sends progress notifications
# (3.4.31 or 3.5.13 and later), which Debian's 3.4.23 does not, and the
# cache is what every real cluster runs with (docs/development.md).
check_etcd() {
  local version
  version="$(kubernetes_requires go.etcd.io/etcd/server/v3 "$K8S_VERSION")"
  if [ -z "$version" ]; then
    say "cannot tell which etcd k8s.io/kubernetes v$K8S_VERSION requires: its go.mod did not download or names no go.etcd.io/etcd/server/v3"
    exit 1
  fi
  # Another version: a link to Debian's etcd that an earlier version of this
  # script made, or a build for another Kubernetes release. build_k8s_set
  # builds it again, in Kubernetes's module, at the version it requires.
  if [ -e "$BIN/etcd" ] && ! "$BIN/etcd" --version 2>/dev/null | grep -qx "etcd Version: ${version#v}"; then rm -f "$BIN/etcd"; fi
}

# kubernetes_go_mod prints the path of k8s.io/kubernetes's go.mod at VERSION.
kubernetes_go_mod() {
  go mod download -json "k8s.io/kubernetes@v$1" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p'
}

# kubernetes_requires MODULE VERSION prints the version of MODULE that
# k8s.io/kubernetes@VERSION requires.
kubernetes_requires() {
  awk -v m="$1" '$1 == m { print $2; exit }' "$(kubernetes_go_mod "$2")"
}

# k8s.io/kubernetes replaces its staging modules with ./staging/... paths,
# which do not exist in the module cache; point each at its published version.
staging_replaces() {
  local version="$1"
  grep -E '^\s*k8s.io/[a-z0-9-]+ => ./staging/' "$(kubernetes_go_mod "$version")" | awk '{print $1}' |
    while read -r m; do echo "replace $m => $m v0.${version#1.}"; done
}

# build_k8s NAME VERSION PACKAGE OUT builds a package of k8s.io/kubernetes
# into OUT: a command, or with TEST=1 a test binary (go test -c).
build_k8s() { build_go "$1" k8s.io/kubernetes "$2" "$3" "$4"; }

# build_go NAME MODULE VERSION PACKAGE OUT builds PACKAGE of MODULE at
# VERSION into OUT, in a module of its own that requires it.
build_go() {
  local name="$1" module="$2" version="$3" pkg="$4" out="$5"
  if [ -x "$out" ]; then return; fi
  mkdir -p "$(dirname "$out")"
  say "building $name v$version from the Go module proxy (first time only, several minutes on 2 cores)"
  local work status=0
  work="$(mktemp -d)"
  (
    cd "$work"
    go mod init "strata.local/$name" >/dev/null 2>&1
    go mod edit -require "$module@v$version"
    if [ "$module" = k8s.io/kubernetes ]; then staging_replaces "$version" >>go.mod; fi
    printf 'package main\nimport _ "%s"\nfunc main() {}\n' "$pkg" >tools.go
    GOFLAGS=-mod=mod go mod tidy >/dev/null 2>&1 || true
    # The node's components say their version (kubectl get nodes shows the
    # kubelet's); the API server keeps the build's own, which envtest reads.
    local ldflags=""
    if [ "$module" = k8s.io/kubernetes ]; then
      case "$name" in kube-apiserver | kubectl) ;; *)
        ldflags="-X k8s.io/component-base/version.gitVersion=v$version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$(echo "$version" | cut -d. -f2)" ;;
      esac
    fi
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

# k8s_package NAME is the package of a command: etcd's server, or one
# of k8s.io/kubernetes's.
k8s_package() {
  if [ "$1" = etcd ]; then echo go.etcd.io/etcd/server/v3; else echo "k8s.io/kubernetes/cmd/$1"; fi
}

# current NAME VERSION: bin/k8s has the command, and the kubelet is of the
# version (an older tree built it at 1.34).
current() {
  [ -x "$BIN/$1" ] || return 1
  [ "$1" != kubelet ] || "$BIN/kubelet" --version | grep -qx "Kubernetes v$2"
}

# build_k8s_set VERSION NAME... builds the commands of k8s.io/kubernetes at
# VERSION that bin/k8s lacks, and etcd at the version it requires, in one
# scratch module: one module, one set of dependency versions, so the
# libraries they share (client-go, gRPC, etcd's client) compile once, and
# one go build, so the go command schedules their packages on the cores.
build_k8s_set() {
  local version="$1" name missing=() status=0 work
  shift
  for name in "$@"; do current "$name" "$version" || missing+=("$name"); done
  [ "${#missing[@]}" -gt 0 ] || return 0
  say "building ${missing[*]} of Kubernetes v$version from the Go module proxy (first time only, several minutes on 2 cores)"
  work="$(mktemp -d)"
  (
    cd "$work"
    go mod init strata.local/k8s >/dev/null 2>&1
    go mod edit -require "k8s.io/kubernetes@v$version"
    staging_replaces "$version" >>go.mod
    for name in "${missing[@]}"; do echo "import _ \"$(k8s_package "$name")\""; done | { echo "package main"; cat; echo "func main() {}"; } >tools.go
    GOFLAGS=-mod=mod go mod tidy >/dev/null 2>&1 || true
    # The node's components say their version (kubectl get nodes shows the
    # kubelet's); the API server keeps the build's own, which envtest
    # reads, and so do kubectl and etcd.
    local versioned=() plain=()
    for name in "${missing[@]}"; do
      case "$name" in kube-apiserver | kubectl | etcd) plain+=("$name") ;; *) versioned+=("$name") ;; esac
    done
    local version_flags="-X k8s.io/component-base/version.gitVersion=v$version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$(echo "$version" | cut -d. -f2)"
    mkdir out
    # No debug information: these are run, not debugged, and leaving it
    # out takes a good part of each compile and link on a fresh machine.
    # The second build finds the first's packages compiled.
    if [ "${#versioned[@]}" -gt 0 ]; then go_build_k8s "$version_flags" "${versioned[@]}"; fi
    if [ "${#plain[@]}" -gt 0 ]; then go_build_k8s "" "${plain[@]}"; fi
  ) || status=$?
  if [ "$status" = 0 ]; then
    for name in "${missing[@]}"; do
      mv "$work/out/$name" "$BIN/$name"
      say "$name ready"
    done
  fi
  # Removed here, not by a RETURN trap: a trap stays set after the
  # function and fires, with $work gone, when its caller returns.
  rm -rf "$work"
  return "$status"
}

# go_build_k8s LDFLAGS NAME... builds the commands into out/NAME, in the
# scratch module of build_k8s_set.
go_build_k8s() {
  local ldflags="$1" name pkgs=()
  shift
  for name in "$@"; do pkgs+=("$(k8s_package "$name")"); done
  CGO_ENABLED="${CGO_ENABLED:-1}" GOFLAGS=-mod=mod go build -gcflags=all=-dwarf=false -ldflags "-s -w $ldflags" -o out/ "${pkgs[@]}"
  # go build names etcd's server for its module's last element.
  if [ -e out/server ]; then mv out/server out/etcd; fi
}

check_etcd
case "${1:-}" in
# The local cluster (`strata up`, the end-to-end suite): `hack/control-plane.sh
# nodes`; `cluster` is the same without the kubelet.
nodes) build_k8s_set "$K8S_VERSION" etcd kube-apiserver kube-controller-manager kube-scheduler kube-proxy kubectl kubelet ;;
cluster) build_k8s_set "$K8S_VERSION" etcd kube-apiserver kube-controller-manager kube-scheduler kube-proxy kubectl ;;
*) build_k8s_set "$K8S_VERSION" etcd kube-apiserver ;;
esac
# Kubernetes' storage e2e against strata's driver (`make conformance`): the
# e2e.test binary and agnhost, the image most of its pods run.
if [ "${1:-}" = conformance ]; then
  TEST=1 build_k8s e2e.test "$K8S_VERSION" k8s.io/kubernetes/test/e2e "$ROOT/bin/conformance/e2e.test"
  CGO_ENABLED=0 build_k8s agnhost "$K8S_VERSION" k8s.io/kubernetes/test/images/agnhost "$ROOT/bin/conformance/agnhost"
fi
# The plan benchmark's reference (`hack/control-plane.sh kubectl`): a kubectl
# of the same version, built the same way, not a distribution's wrapper.
if [ "${1:-}" = kubectl ]; then build_k8s_set "$K8S_VERSION" kubectl; fi
echo "$BIN"
