#!/usr/bin/env bash
# The node agent before and after its one home (issue #40), side by side
# in one run (hack/sidebyside.sh): BASELINE (default 0cfa2b1, main before
# the redesign) against the work tree's HEAD, ROUNDS times (default 3):
# btrfs volume creates through the agent's API (hack/volbench), btrfs and
# LVM replication (hack/replbench) and a node loss to the app on the
# backup (BenchmarkNodeLossToReady). Root only: all attach loop disks.
set -euo pipefail
cd "$(dirname "$0")/.."
bash hack/packages.sh
BEFORE=${BASELINE:-0cfa2b1} exec bash hack/sidebyside.sh 'hack/volbench -rounds 1' 'hack/replbench -rounds 1' 'hack/replbench -rounds 1 -mover lvm' \
  'failover/controller.test -test.run ^$ -test.bench BenchmarkNodeLossToReady -test.benchtime 1x'
