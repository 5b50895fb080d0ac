#!/bin/bash
# H200 x2, device call B: unpack the CuTe DSL bundle (.carryA from call A + .carryB); on GPU 0 the CuTe DSL
# and Triton cases of the judge suite and the ~50 us custom-kernel spread; on GPU 1 the torch.compile
# baselines (fixed reference module) for OFFLINE_SET.
set -u
OUT=${OUT:-h200-out}; mkdir -p "$OUT" /tmp/chunks /tmp/cute
cp .carryB/* /tmp/chunks/
cat /tmp/chunks/cute_b.tar.xz.part* | python3 -c "import sys, tarfile; tarfile.open(fileobj=sys.stdin.buffer, mode='r|xz').extractall('/tmp/cute')"
export PYTHONPATH=/tmp/cute/site:/tmp/cute/site/nvidia_cutlass_dsl/dsl_packages:$PYTHONPATH
. bench/h200/problem_sets.sh
(
  export CUDA_VISIBLE_DEVICES=0
  python3 -c "import cutlass, cutlass.cute as cute; print('cutlass-dsl', cutlass.__file__)" > "$OUT/cute.log" 2>&1
  timeout 110 python3 bench/judge_gpu_suite.py --only swiglu_cute_dsl --only fixtures/rmsnorm_triton \
      --staging-root /tmp/suite --out "$OUT/suite_b.md" >> "$OUT/cute.log" 2>&1
  echo "suite rc=$?" >> "$OUT/cute.log"
  timeout 45 python3 bench/judge_overhead.py --device cuda --repeats 3 --skip-overhead --spread-filter "~50 us" \
      --staging-root /tmp/suite --out "$OUT/spread50.md" > "$OUT/spread50.log" 2>&1
) &
(
  export CUDA_VISIBLE_DEVICES=1
  timeout 140 python3 -m solforge baseline $OFFLINE_SET --device cuda --max-workloads 1 --no-save --json \
      --variants eager,compile-default,cudagraph-eager,cudagraph-compile-default --warmup 5 --iterations 30 \
      > "$OUT/baselines_compiled.jsonl" 2> "$OUT/baselines_compiled.log"
) &
wait
wc -l "$OUT"/*
