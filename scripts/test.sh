#!/usr/bin/env bash
# Set up the environment and run the default test suite (heavy runs: add `-m slow`).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh test
exec .venv/bin/python -m pytest "$@"
