#!/usr/bin/env bash
# Runs benchmarks of two commits side by side in one run, in alternation,
# so that a busy machine weighs on both alike: BEFORE (required) and AFTER
# (default HEAD) are each checked out in a worktree under bin/sidebyside/
# and built there; then, ROUNDS times (default 3), each command runs at
# both: BEFORE first in odd rounds, AFTER first in even ones, so that what
# a run leaves behind (dirty pages still being written back) weighs on
# both sides alike. A command is a program and its arguments, quoted
# as one word:
#   hack/NAME ...        a program of hack/, built with go build
#   PKG.test ...         a package's tests, built with go test -c
# e.g. BEFORE=af9f064 hack/sidebyside.sh 'hack/replbench -rounds 1'.
# Results are printed, and recorded by hand in docs/benchmarks.md.
set -euo pipefail
cd "$(dirname "$0")/.."
export GOTOOLCHAIN=local
before=${BEFORE:?set BEFORE to the commit to compare with}
after=${AFTER:-$(git rev-parse --short HEAD)}
rounds=${ROUNDS:-3}

# checkout puts commit in bin/sidebyside/COMMIT/src, once, and echoes the
# folder its programs are built into.
checkout() {
  local dir=bin/sidebyside/$1
  if [ ! -d "$dir/src" ]; then
    mkdir -p "$dir"
    git worktree add --detach "$dir/src" "$1" >/dev/null
  fi
  # The programs find bin/ (minio, k8s) from their sources' folder.
  ln -sfn "$PWD/bin" "$dir/src/bin"
  echo "$dir"
}

# build builds a command's program at a checkout; it echoes its path.
build() {
  local dir=$1 prog=$2 out
  out=$PWD/$dir/$(echo "$prog" | tr / _)
  case "$prog" in
    *.test) (cd "$dir/src" && go test -c -o "$out" "./${prog%.test}") ;;
    *) (cd "$dir/src" && go build -o "$out" "./$prog") ;;
  esac
  echo "$out"
}

declare -A bins
for commit in "$before" "$after"; do
  dir=$(checkout "$commit")
  for cmd in "$@"; do
    prog=${cmd%% *}
    bins[$commit/$prog]=$(build "$dir" "$prog")
  done
done
export KUBEBUILDER_ASSETS=${KUBEBUILDER_ASSETS:-$PWD/bin/k8s}
for i in $(seq "$rounds"); do
  order=("$before" "$after")
  [ $((i % 2)) = 0 ] && order=("$after" "$before")
  for commit in "${order[@]}"; do
    for cmd in "$@"; do
      prog=${cmd%% *}
      args=${cmd#"$prog"}
      echo "== round $i, $commit: $cmd"
      # A test binary runs in its package's folder, as go test runs it.
      case "$prog" in
        *.test) (cd "bin/sidebyside/$commit/src/${prog%.test}" && eval "\"${bins[$commit/$prog]}\" $args") ;;
        *) eval "\"${bins[$commit/$prog]}\" $args" ;;
      esac
    done
  done
done
