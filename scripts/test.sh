#!/usr/bin/env bash
# Set up an environment and run the default test suite (heavy runs: add `-m slow`).
#
#   bash scripts/test.sh [--oldest | --newest] [--query-planning] [pytest arguments...]
#
# (no option)        .venv (scripts/setup.sh test): the development environment
# --oldest           .venv-oldest, made anew: every dependency of pyproject.toml (and of
#                    the test extra) at its lower bound (uv --resolution lowest-direct);
#                    fails first if a lower bound is not the version that got installed
# --newest           .venv-newest, made anew: the newest release of every dependency
# --query-planning   DASK_ARRAY__QUERY_PLANNING=True (dask's array query planning) for
#                    the run and every process it starts
#
# The oldest and newest environments are installed by uv, itself installed from the
# package registry into .venv-uv; the versions installed are printed before the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
deps=""
while [ $# -gt 0 ]; do
  case "$1" in
    --oldest) deps=oldest ;;
    --newest) deps=newest ;;
    --query-planning) export DASK_ARRAY__QUERY_PLANNING=True ;;
    *) break ;;
  esac
  shift
done

if [ -z "$deps" ]; then
  bash scripts/setup.sh test
  venv=.venv
else
  if [ ! -x .venv-uv/bin/uv ]; then
    "$PY" -m venv .venv-uv
    .venv-uv/bin/python -m pip install --quiet uv
  fi
  venv=.venv-$deps
  export DKRR_DEPS=$deps  # what tests that compare with the development environment read
  resolution=$([ "$deps" = oldest ] && echo lowest-direct || echo highest)
  # a new environment each time: nothing left from an earlier resolution survives
  .venv-uv/bin/uv venv --quiet --clear --python "$PY" "$venv"
  .venv-uv/bin/uv pip install --quiet --python "$venv/bin/python" --resolution "$resolution" -e ".[test]"
  "$venv/bin/python" scripts/dep_versions.py ${deps:+--$deps}
fi
if [ -n "${DASK_ARRAY__QUERY_PLANNING:-}" ]; then
  echo "DASK_ARRAY__QUERY_PLANNING=$DASK_ARRAY__QUERY_PLANNING"
fi
# one pytest worker per core (pytest-xdist), a test file per worker at a time (its module
# fixtures are built once); DKRR_TEST_WORKERS=0 runs in this process
exec "$venv/bin/python" -m pytest -n "${DKRR_TEST_WORKERS:-auto}" --dist loadfile "$@"
