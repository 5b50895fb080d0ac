#!/usr/bin/env bash
# First look at the judge on a CUDA machine: honest PyTorch, Triton and CUDA C++ solutions of the
# fixture problem. Usage (on the GPU machine, from the repo root): bash bench/gpu_smoke.sh OUTDIR
set -u
out=${1:-/tmp/smoke}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$out/gpu.txt"
python3 -c "import torch,sys; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name(0), 'py', sys.version.split()[0])"
python3 -c "from sol_bench import sandbox; print('landlock abi', sandbox.landlock_abi())"
for s in rmsnorm_pytorch rmsnorm_triton rmsnorm_cuda_ptx; do
  echo "== $s"
  /usr/bin/time -f "%e s wall" python3 -m sol_bench eval tests/fixtures/problems/rmsnorm_small \
    --solution tests/fixtures/solutions/$s.json --device cuda --json -o "$out/$s.jsonl" > /dev/null 2> "$out/$s.err"
  echo "rc=$?"; tail -3 "$out/$s.err"
  python3 - "$out/$s.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    t = json.loads(line); e = t["evaluation"]; p = e.get("performance") or {}
    print(t["workload"]["uuid"], e["status"], e.get("reason"), p.get("latency_ms"), p.get("reference_latency_ms"), p.get("latency_iqr_ms"), e.get("t_sol_ms"), p.get("sm_clock_mhz"), e["environment"].get("sandbox"), e.get("phase_seconds"))
PY
done
