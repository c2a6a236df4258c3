#!/usr/bin/env bash
# The test suite: set up (once), then run pytest. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
python -m pytest -q "$@"
