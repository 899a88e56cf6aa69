#!/usr/bin/env bash
# Set up the environment and run the default test suite (heavy runs: add `-m slow`).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh test
# one pytest worker per core (pytest-xdist), a test file per worker at a time (its module
# fixtures are built once); DKRR_TEST_WORKERS=0 runs in this process
exec .venv/bin/python -m pytest -n "${DKRR_TEST_WORKERS:-auto}" --dist loadfile "$@"
