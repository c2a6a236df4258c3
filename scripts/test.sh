#!/usr/bin/env bash
# The test suite: set up (once), then run pytest, one worker per core (pytest-xdist). Extra arguments go to pytest
# (-n 0: one process). Each worker computes on one thread: two OpenMP threads per worker on as many cores as
# workers would wait for each other at every barrier. --dist worksteal: a worker that runs out of tests takes half
# of another's queue, so the long script tests of one module do not leave the other worker idle at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} python -m pytest -q -n auto --dist worksteal "$@"
