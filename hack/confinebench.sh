#!/usr/bin/env bash
# Replication and image jobs before and after their confinement (issue
# #39), side by side in one run: hack/replbench and hack/imagebench are
# built at BASELINE (default af9f064, main before the confinement) in a
# worktree under bin/, and at the work tree, and run in alternation, one
# round each, ROUNDS times (default 3); ONLY=replication or ONLY=images
# runs one of the two. Root only: both attach loop disks.
# Results are printed, and recorded by hand in docs/benchmarks.md.
set -euo pipefail
cd "$(dirname "$0")/.."
export GOTOOLCHAIN=local
base=${BASELINE:-af9f064}
rounds=${ROUNDS:-3}
dir=bin/baseline-$base
if [ ! -d "$dir/src" ]; then
  git worktree add --detach "$dir/src" "$base" >/dev/null
fi
# The baseline's programs find bin/ (minio) from their sources' folder.
ln -sfn "$PWD/bin" "$dir/src/bin"
(cd "$dir/src" && go build -o ../replbench ./hack/replbench && go build -o ../imagebench ./hack/imagebench)
go build -o bin/replbench ./hack/replbench
go build -o bin/imagebench ./hack/imagebench
bash hack/tools.sh minio
for i in $(seq "$rounds"); do
  for side in baseline confined; do
    bin=bin
    [ "$side" = baseline ] && bin=$dir
    if [ "${ONLY:-replication}" = replication ] || [ -z "${ONLY:-}" ]; then
      echo "== round $i, $side ($bin): replication"
      "$bin/replbench" -rounds 1
    fi
    if [ "${ONLY:-images}" = images ] || [ -z "${ONLY:-}" ]; then
      echo "== round $i, $side ($bin): image jobs"
      "$bin/imagebench" -rounds 1
    fi
  done
done
