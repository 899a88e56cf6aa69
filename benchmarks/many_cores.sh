#!/usr/bin/env bash
# The two benchmarks that need more cores than the 2-core development machine, in one run:
#
#   1. bench_1e8: the 10^8-row fit (issue 26, item 4) on a LocalCluster of one worker per
#      core (WORKERS, default: every core), the store generated on the workers first;
#   2. bench_cv_workers: the D = 4096, cv = 5 CV step (issue 26, item 2) with its K = 5 fold
#      solves as tasks on 5 workers against the same folds solved on the client (and, with
#      CV_SERIAL=1, first on 1 worker: the step's scaling with the workers).
#
# Usage, from the repository root, on a machine with dkrr's dependencies installed (or with
# their wheels in WHEELS, default .whl/, installed to /tmp/site first: a machine without package
# access; WHEELS= skips them):
#
#   bash benchmarks/many_cores.sh OUTDIR
#
# The reports and logs go to OUTDIR. BUDGET_S (default 560) bounds the whole run: the second
# benchmark waits for the load the first left to fall below 0.2 per core, then gets what is
# left. N, COMPARE_N, CV_COMPONENTS, CV_ROWS shrink the problems for a quick check
# (N=2000000 COMPARE_N=500000 CV_COMPONENTS=512 CV_ROWS=4000 ALLOW_LOAD=1). Every number in
# the reports is measured in that run on that machine; the reports name the machine (CPU,
# cores, memory, library versions) and the commit.
set -u
out=${1:?usage: bash benchmarks/many_cores.sh OUTDIR}
mkdir -p "$out"
py=${PYTHON:-python3}
start=$SECONDS
budget=${BUDGET_S:-560}
wheels=${WHEELS-.whl}
if [ -n "$wheels" ] && compgen -G "$wheels/*.whl" >/dev/null; then
    "$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$wheels"/*.whl || exit 1
    export PYTHONPATH=/tmp/site:$PWD
else
    export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONUNBUFFERED=1
git config --global --add safe.directory "$PWD" 2>/dev/null
workers=${WORKERS:-$(nproc)}
load=()
[ -n "${ALLOW_LOAD:-}" ] && load=(--allow-load)
echo "cores $(nproc); workers $workers; commit $(git rev-parse --short HEAD 2>/dev/null); $(uptime)"
"$py" -c "import dkrr, dask, distributed, zarr, numpy, numba; print('imports ok', numpy.__version__, dask.__version__)" || exit 1

timeout $((budget - (SECONDS - start))) "$py" -m benchmarks.bench_1e8 --store /tmp/bench_1e8.zarr \
    --workers "$workers" --n "${N:-100000000}" --compare-n ${COMPARE_N:-10000000} \
    --out "$out/fit_1e8_${workers}workers.txt" "${load[@]}" 2>&1 | tee "$out/fit_1e8.log"
echo "bench_1e8 exit ${PIPESTATUS[0]} after $((SECONDS - start)) s"
rm -rf /tmp/bench_1e8.zarr

# the fit leaves the 1-minute load near the number of cores, above the quiet rule
# (benchmarks/_validity.py: 0.25 per core): wait for it to fall, within the budget
limit=$(awk -v c="$(nproc)" 'BEGIN {print 0.2 * c}')
while [ -z "${ALLOW_LOAD:-}" ] && awk -v l="$limit" '{exit !($1 >= l)}' /proc/loadavg \
        && [ $((budget - (SECONDS - start))) -gt 60 ]; do
    sleep 5
done
echo "load before bench_cv_workers: $(cut -d' ' -f1-3 /proc/loadavg)"
left=$((budget - (SECONDS - start)))
if [ -n "${CV_SERIAL:-}" ] && [ "$left" -gt 30 ]; then  # the same folds one after another on 1 worker
    timeout "$left" "$py" -m benchmarks.bench_cv_workers --workers 1 --skip-client --n-components "${CV_COMPONENTS:-4096}" \
        --rows "${CV_ROWS:-20000}" "${load[@]}" 2>&1 | tee "$out/cv_workers_1worker.txt"
    left=$((budget - (SECONDS - start)))
fi
if [ "$left" -gt 30 ]; then
    timeout "$left" "$py" -m benchmarks.bench_cv_workers --workers 5 --n-components "${CV_COMPONENTS:-4096}" \
        --rows "${CV_ROWS:-20000}" "${load[@]}" 2>&1 | tee "$out/cv_workers_5workers.txt"
    echo "bench_cv_workers exit ${PIPESTATUS[0]} after $((SECONDS - start)) s"
else
    echo "bench_cv_workers not run: ${left} s left of BUDGET_S=${budget}"
fi
