#!/usr/bin/env bash
# Runs the guest suites of hack/kernel-tests.txt one package after another
# and prints how each ended and how long it took (make kernel-test).
# `hack/kernel-test.sh skip` prints instead the go test -skip pattern that
# leaves them out of a run of every package.
set -euo pipefail
cd "$(dirname "$0")/.."
list=hack/kernel-tests.txt

tests() { grep -v '^#' "$list" | grep -v '^$'; }

if [ "${1:-}" = skip ]; then
  tests | cut -f2 | tr ' ' '\n' | sort -u | sed 's/.*/^&$/' | paste -sd'|'
  exit 0
fi

summary=()
failed=0
while IFS=$'\t' read -r pkg names; do
  pattern="^($(echo "$names" | tr ' ' '|'))\$"
  start=$SECONDS
  echo "► $pkg: $names (in the guest)"
  if go test -count=1 -timeout 40m -v -run "$pattern" "$pkg"; then
    result=PASS
  else
    result=FAIL
    failed=1
  fi
  summary+=("$(printf '%-5s %5ds  %s %s' "$result" $((SECONDS - start)) "$pkg" "$names")")
done < <(tests)
echo "► kernel tests (docs/development.md, \"Tests on a real kernel\"):"
printf '  %s\n' "${summary[@]}"
exit $failed
