#!/usr/bin/env bash
# Runs the engine benchmark on a local control plane, strata first, then
# Flux's kustomize-controller as the reference. Extra arguments go to
# hack/bench (see its flags); results are printed, and recorded by hand in
# docs/benchmarks.md with the command.
set -euo pipefail
cd "$(dirname "$0")/.."
export GOTOOLCHAIN=local
bash hack/flux.sh
go run ./hack/bench -flux bin/flux/kustomize-controller "$@"
