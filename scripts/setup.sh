#!/usr/bin/env bash
# Create .venv (Python 3.11+) and install dkrr with the given extras, e.g. `scripts/setup.sh test`.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
if [ -n "${1:-}" ]; then
  .venv/bin/python -m pip install --quiet -e ".[$1]"
else
  .venv/bin/python -m pip install --quiet -e .
fi
