#!/usr/bin/env bash
# Runs the engine benchmark on a local control plane. Extra arguments go to
# hack/bench (see its flags); results are printed, and recorded by hand in
# docs/benchmarks.md with the command.
set -euo pipefail
cd "$(dirname "$0")/.."
export GOTOOLCHAIN=local
go run ./hack/bench "$@"
