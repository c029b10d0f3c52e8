#!/usr/bin/env bash
# Installs the Go tools the Makefile uses into bin/ with `go install`.
# Idempotent: a tool already at the pinned version is not rebuilt.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BIN="$ROOT/bin"
mkdir -p "$BIN"
export GOTOOLCHAIN=local

install_tool() {
  local name="$1" pkg="$2" version="$3"
  local stamp="$BIN/.$name-$version"
  if [ -x "$BIN/$name" ] && [ -f "$stamp" ]; then return; fi
  echo "tools: installing $name $version" >&2
  # No debug information: tools are run, not debugged, and leaving it out
  # takes a good part of each compile and link on a fresh machine.
  GOBIN="$BIN" go install -gcflags=all=-dwarf=false -ldflags "-s -w" "$pkg@$version"
  touch "$stamp"
}

# install_flux_cli builds Flux's own CLI, to check that `flux get sources` and
# `flux reconcile source` work against strata (docs/sources.md). `go install`
# refuses a module with replace directives, and the CLI embeds install
# manifests that its release build generates: build from a copy of the module
# with an empty manifests directory (the tests use no `flux install`).
install_flux_cli() {
  local version="$1"
  local stamp="$BIN/.flux-cli-$version"
  if [ -x "$BIN/flux-cli" ] && [ -f "$stamp" ]; then return; fi
  echo "tools: building the flux CLI $version (about 2 minutes, first time only)" >&2
  local dir work
  dir="$(go mod download -json "github.com/fluxcd/flux2/v2@$version" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')"
  work="$(mktemp -d)"
  cp -r "$dir" "$work/src" && chmod -R u+w "$work/src"
  mkdir -p "$work/src/cmd/flux/manifests" && echo "# not embedded" > "$work/src/cmd/flux/manifests/none.yaml"
  (cd "$work/src" && GOFLAGS=-mod=mod go build -trimpath -ldflags "-s -w" -o "$BIN/flux-cli" ./cmd/flux)
  rm -rf "$work"
  touch "$stamp"
}

# unpack_flux_controllers unpacks Flux's real controllers, built from their
# sources and kept beside the project (../shared/flux, its README says how),
# for the tests that run strata beside them.
unpack_flux_controllers() {
  local src="$ROOT/../shared/flux" name
  mkdir -p "$BIN/flux"
  for name in source-controller notification-controller helm-controller; do
    if [ -x "$BIN/flux/$name" ] && [ "$BIN/flux/$name" -nt "$src/$name.xz" ]; then continue; fi
    if [ ! -f "$src/$name.xz" ]; then echo "tools: $src/$name.xz is missing" >&2; exit 1; fi
    echo "tools: unpacking Flux's $name" >&2
    xz -dc "$src/$name.xz" > "$BIN/flux/$name.tmp" && chmod +x "$BIN/flux/$name.tmp" && mv "$BIN/flux/$name.tmp" "$BIN/flux/$name"
  done
  # Their CRDs, at the same commits, beside them (kept when bin/ is reused
  # by a worktree that has no ../shared of its own).
  if [ -d "$src/crds" ]; then
    mkdir -p "$BIN/flux/crds"
    cp "$src"/crds/*.yaml "$BIN/flux/crds/"
  elif [ ! -d "$BIN/flux/crds" ]; then
    echo "tools: $src/crds is missing" >&2; exit 1
  fi
}

for tool in "$@"; do
  case "$tool" in
    controller-gen) install_tool controller-gen sigs.k8s.io/controller-tools/cmd/controller-gen v0.23.0 ;;
    golangci-lint) install_tool golangci-lint github.com/golangci/golangci-lint/v2/cmd/golangci-lint v2.15.0 ;;
    csi-sanity) install_tool csi-sanity github.com/kubernetes-csi/csi-test/v5/cmd/csi-sanity v5.6.0 ;;
    helm) install_tool helm helm.sh/helm/v3/cmd/helm v3.22.0 ;;
    # The S3 server image volumes are tested against (about 4 minutes to build).
    # The OCI registry the local cluster pulls the release from (docs/release.md).
    registry) install_tool registry github.com/distribution/distribution/v3/cmd/registry v3.1.2 ;;
    # cosign, to check that the release's signatures are what it verifies (docs/release.md).
    cosign) install_tool cosign github.com/sigstore/cosign/v2/cmd/cosign v2.6.5 ;;
    # sops, to encrypt the files the decryption tests read, as users do (docs/engine.md).
    sops) install_tool sops github.com/getsops/sops/v3/cmd/sops v3.13.3 ;;
    flux-cli) install_flux_cli v2.9.5 ;;
    flux-controllers) unpack_flux_controllers ;;
    minio) install_tool minio github.com/minio/minio v0.0.0-20260212201848-7aac2a2c5b7c ;;
    *) echo "tools: unknown tool $tool" >&2; exit 2 ;;
  esac
done
