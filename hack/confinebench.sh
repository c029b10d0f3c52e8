#!/usr/bin/env bash
# Replication and image jobs before and after their confinement (issue
# #39), side by side in one run (hack/sidebyside.sh): BASELINE (default
# af9f064, main before the confinement) against the work tree's HEAD,
# ROUNDS times (default 3). Root only: both attach loop disks.
set -euo pipefail
cd "$(dirname "$0")/.."
bash hack/tools.sh minio
BEFORE=${BASELINE:-af9f064} exec bash hack/sidebyside.sh 'hack/replbench -rounds 1' 'hack/imagebench -rounds 1'
