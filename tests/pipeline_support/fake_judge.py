"""A stand-in for ``python -m sol_bench eval`` used only while the real judge CLI is absent.

Called as ``fake_judge.py -m sol_bench eval PROBLEM --solution FILE --device D --json ...``.
Set FAKE_JUDGE_SLEEP to make each workload take that many seconds.
"""

import argparse
import os
import sys
import time

import torch


def main() -> int:
    sys.path.insert(0, os.getcwd())
    args = sys.argv[1:]
    assert args[:3] == ["-m", "sol_bench", "eval"], args
    ap = argparse.ArgumentParser()
    ap.add_argument("problem")
    ap.add_argument("--solution")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--timeout")
    ap.add_argument("--compile-timeout")
    ns = ap.parse_args(args[3:])
    from sol_bench.inputs import make_inputs
    from sol_bench.models import Correctness, Environment, Evaluation, Performance, Status, Trace
    from sol_bench.problem import load_problem, load_solution
    from sol_bench.reference import load_reference

    problem = load_problem(ns.problem)
    sol = load_solution(ns.solution)
    ref = load_reference(problem.definition)
    src = next(s.content for s in sol.sources if s.path == sol.spec.entry_file)
    scope: dict = {}
    exec(compile(src, sol.spec.entry_file, "exec"), scope)
    fn = scope[sol.spec.entry_function]
    for w in problem.workloads:
        time.sleep(float(os.environ.get("FAKE_JUDGE_SLEEP", "0")))
        inputs = make_inputs(problem.definition, w, "cpu", 0, ref)
        args_ = list(inputs.values()) if isinstance(inputs, dict) else list(inputs)
        t0 = time.perf_counter(); want = ref.run(*args_); t_ref = (time.perf_counter() - t0) * 1e3
        t0 = time.perf_counter(); got = fn(*args_); t_k = (time.perf_counter() - t0) * 1e3
        ok = torch.allclose(got.float(), want.float(), atol=1e-2, rtol=2e-2)
        err = float((got.float() - want.float()).abs().max())
        ev = Evaluation(
            status=Status.PASSED if ok else Status.INCORRECT_NUMERICAL,
            environment=Environment(hardware="cpu"),
            correctness=Correctness(max_relative_error=err, max_absolute_error=err),
            performance=Performance(latency_ms=max(t_k, 1e-3), reference_latency_ms=max(t_ref, 1e-3),
                                    speedup_factor=max(t_ref, 1e-3) / max(t_k, 1e-3)) if ok else None,
            t_sol_ms=1e-4, seed=0, device="cpu",
        )
        print(Trace(definition=problem.name, solution=sol.name, workload=w, evaluation=ev).model_dump_json())
    return 0


if __name__ == "__main__":
    sys.exit(main())
