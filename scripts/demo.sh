#!/usr/bin/env bash
# Set up the environment and run the main job end to end on the shipped CASP data.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python -m pipelines.demo "$@"
