# strata: `make up` runs it locally, `make test` runs every test.
SHELL := /usr/bin/env bash
export GOTOOLCHAIN := local
GO ?= go
BIN := $(CURDIR)/bin
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
# make release takes only a semantic version given on the command line.
RELEASE_VERSION := $(if $(filter command line,$(origin VERSION)),$(VERSION))
export KUBEBUILDER_ASSETS := $(BIN)/k8s

.PHONY: all build test kernel-test screenshots e2e conformance lint generate bench up sanity tools control-plane packages sidecars clean release release-lock verify-release

all: build

# strata and strata-node, with the flags every build of strata's programs
# shares (hack/build-flags): the local release's compile is this one's.
build:
	@echo "► building bin/strata and bin/strata-node"
	CGO_ENABLED=0 $(GO) build $(shell grep -v '^#' hack/build-flags) -ldflags "-s -w -X main.version=$(VERSION)" -o $(BIN)/ ./cmd/strata ./cmd/strata-node

control-plane:
	@bash hack/control-plane.sh nodes >/dev/null

packages:
	@bash hack/packages.sh

# The CSI sidecars the chart runs, for amd64 and arm64, built from the Go
# module proxy (hack/sidecars.txt).
sidecars:
	@bash hack/sidecars.sh >/dev/null

tools:
	@bash hack/tools.sh controller-gen golangci-lint

generate:
	@bash hack/tools.sh controller-gen
	@bash hack/generate.sh

# Every test, against a real kube-apiserver and etcd and real git servers.
# Packages run one after another: each starts its own API server. The
# guest suites (hack/kernel-tests.txt) run first, on their own.
test: control-plane packages sidecars
	@bash hack/tools.sh csi-sanity helm minio registry cosign sops flux-cli flux-controllers
	@bash hack/flux.sh
	@bash hack/kernel-test.sh
	@echo "► running tests"
	$(GO) test -count=1 -p 1 -timeout 20m -skip '$(shell bash hack/kernel-test.sh skip)' ./...

# The tests that need device-mapper, dm-thin-pool or the kernel's NFS
# server, each in a qemu guest on Debian's kernel built from
# hack/guest/packages.lock (internal/testing/guest), with a summary.
kernel-test: control-plane packages
	@bash hack/tools.sh csi-sanity
	@bash hack/kernel-test.sh

# Screenshots of every dashboard view, taken by the browser test in
# headless Chromium, into docs/dashboard/ (docs/dashboard.md shows them).
screenshots: control-plane packages
	@mkdir -p docs/dashboard
	STRATA_SCREENSHOTS=$(CURDIR)/docs/dashboard $(GO) test -count=1 -run TestTheDashboardInABrowser ./dashboard

# The end-to-end suite alone: strata installed with its chart into the local
# cluster (two nodes with kubelets), exercised through real pods.
e2e: control-plane packages sidecars
	@bash hack/tools.sh helm registry
	$(GO) test -count=1 -timeout 30m -v ./internal/testing/e2e

# Kubernetes' own storage e2e (e2e.test, external-driver mode) against the
# driver on the local cluster, each backend in turn: over an hour on 2 cores.
# Counts and skip reasons go to bin/conformance/BACKEND.txt (docs/csi.md).
conformance: control-plane packages sidecars
	@bash hack/tools.sh helm registry
	@bash hack/control-plane.sh conformance >/dev/null
	$(GO) test -tags conformance -count=1 -timeout 200m -v -run TestKubernetesStorageSuite ./internal/testing/e2e

# csi-sanity against the CSI driver on its own; SANITY_ARGS go to csi-sanity,
# e.g. SANITY_ARGS=-ginkgo.focus=NodeExpandVolume.
# BACKEND=lvm2 runs it in the test guest, on lvm2 and device-mapper
# (TestSanityLVM2).
BACKEND ?= lvm
sanity: control-plane packages
	@bash hack/tools.sh csi-sanity
ifeq ($(BACKEND),lvm2)
	SANITY_ARGS='$(SANITY_ARGS)' $(GO) test -count=1 -v -run '^TestSanityLVM2$$' ./storage/csi
else
	$(GO) run ./hack/sanity -backend $(BACKEND) -- $(SANITY_ARGS)
endif

# The release under bin/release/$(VERSION): an OCI image index for amd64
# and arm64 of strata on the locked Debian packages and of each image the
# chart runs, SBOMs, signatures, the chart (docs/release.md). With
# REGISTRY=host:port it is pushed there too.
release: sidecars
	@test -n "$(RELEASE_VERSION)" || { echo "give the version: make release VERSION=x.y.z"; exit 1; }
	$(GO) run ./hack/release build -version $(RELEASE_VERSION)
	$(if $(REGISTRY),$(GO) run ./hack/release push -version $(RELEASE_VERSION) -registry $(REGISTRY))

# Verifies bin/release/$(VERSION) offline: every blob, the signature with
# bin/release/signing/cosign.pub, the SBOMs.
verify-release:
	@test -n "$(RELEASE_VERSION)" || { echo "give the version: make verify-release VERSION=x.y.z"; exit 1; }
	$(GO) run ./hack/release verify -version $(RELEASE_VERSION)

# Refreshes hack/release/packages.lock from Debian's archive as it is now.
release-lock:
	$(GO) run ./hack/release lock

lint:
	@bash hack/tools.sh golangci-lint
	$(GO) vet ./...
	@out="$$(gofmt -l $$(git ls-files '*.go'))"; if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(BIN)/golangci-lint run ./...

bench: control-plane build
	@bash hack/bench.sh

# A two-node cluster with strata installed by its chart; the state is kept
# in .strata for the next run (make clean starts afresh). The build plan
# (hack/up-build.sh) builds, for this machine's architecture only, what
# the cluster runs, in two lanes, each step timed; a second run builds
# nothing.
up: packages
	@bash hack/up-build.sh
	$(BIN)/strata up

clean:
	rm -rf .strata $(BIN)/strata
