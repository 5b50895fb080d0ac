#!/bin/bash
# H200 x2, device call C: unpack the pipeline bundle (.carryC: prefect, dask, duckdb, great-expectations...)
# and time solforge run on CAMPAIGN_SET with one GPU, then both.
set -u
OUT=${OUT:-h200-out}; mkdir -p "$OUT" /tmp/pipe
cat .carryC/pipe_b.tar.xz* | python3 -c "import sys, tarfile; tarfile.open(fileobj=sys.stdin.buffer, mode='r|xz').extractall('/tmp/pipe')"
export PYTHONPATH=/tmp/pipe/site:$PYTHONPATH
mkdir -p /tmp/pipe/bin && printf '#!/bin/sh\nexec python3 -m prefect "$@"\n' > /tmp/pipe/bin/prefect && chmod +x /tmp/pipe/bin/prefect
export PATH=/tmp/pipe/bin:$PATH
. bench/h200/problem_sets.sh
SETVAR=${CAMPAIGN_SET_VAR:-CAMPAIGN_SET}; mkdir -p kernels_tmp
python3 -c "import prefect, dask, distributed, duckdb, great_expectations, prefect_dask; print(prefect.__version__)" > "$OUT/campaign.log" 2>&1
timeout ${CAMPAIGN_TIMEOUT:-400} python3 bench/bench_campaign_gpu.py ${!SETVAR} --gpus 0 --gpus 0,1 --max-candidates ${CAMPAIGN_CANDIDATES:-30} ${CAMPAIGN_ARGS:-} --max-workloads 1 \
    --iterations 20 --staging-root kernels_tmp --out "$OUT/campaign.md" >> "$OUT/campaign.log" 2>&1
echo "rc=$?" >> "$OUT/campaign.log"
for f in /tmp/campaign-bench-*/run-*.log; do echo "== $f"; tail -40 "$f"; done > "$OUT/campaign_runs.log" 2>&1
