"""Transfer of winners: what earlier runs measured of a template's points on other problems of a similar size
decides which point (and group) the offline agent plans first on a new problem."""

from __future__ import annotations

import json
import shutil
from datetime import datetime, timezone
from pathlib import Path

from agents.base import AttemptFeedback, WorkloadFeedback
from agents.offline.agent import OfflineAgent, plan
from agents.offline.search import Option, SearchPolicy, Verdict
from agents.offline.transfer import priors, variant_key
from flows.optimize import load_states
from sol_bench.problem import load_problem
from solforge.planning.transfer import KinTable, size_class
from solforge.store import ResultStore
from solforge.store.report_queries import solution_file

FIXTURE = Path(__file__).parent / "fixtures" / "problems" / "rmsnorm_small"


def _options(problem: str) -> list[Option]:
    out = [Option(f"{problem}__ref_eager_cudagraph", "reference/eager_cudagraph", {}, floor=True)]
    for lang in ("cuda", "triton"):
        out += [Option(f"{problem}__norm_{lang}_t{t}", f"norm/{lang}", {"t": t}) for t in (256, 128, 512)]
    return out


def _first_template(options: list[Option], kin) -> Option:
    """What the search takes once the floor has passed: the first template try."""
    floor = options[0]
    return SearchPolicy().next(options, {floor.name}, {floor.name: Verdict(1.0, False)}, priors=priors(options, kin))


def test_variant_key_is_the_problem_independent_part_of_a_name():
    assert variant_key("rms_a__norm_cuda_t128") == variant_key("other_problem__norm_cuda_t128") == "norm_cuda_t128"
    assert variant_key("no_separator") is None and variant_key("trailing__") is None


def test_the_point_that_won_on_kin_is_planned_first_and_plan_order_stands_without_kin():
    options = _options("new")
    assert _first_template(options, {}).name == "new__norm_cuda_t256"  # plan order
    kin = {
        "a": {"norm_cuda_t256": 2.0, "norm_cuda_t128": 1.0, "norm_cuda_t512": 3.0},
        "b": {"norm_cuda_t256": 2.0, "norm_cuda_t128": 1.5},
        "c": {"norm_cuda_t512": 0.1},  # one point alone proves nothing about the parameters
    }
    got = priors(options, kin)
    assert got.point_votes == {"new__norm_cuda_t128": 2}
    assert _first_template(options, kin).name == "new__norm_cuda_t128"
    assert got.note(options[2]) == "planned first: the fastest of its group on 2 of 2 kin problems"


def test_a_group_faster_on_kin_goes_first_and_failed_points_win_nothing():
    options = _options("new")
    kin = {
        "a": {"norm_cuda_t256": 2.0, "norm_triton_t512": 1.0, "norm_triton_t256": None},
        "b": {"norm_cuda_t256": None, "norm_triton_t512": 0.5, "norm_triton_t128": 0.7},
    }
    got = priors(options, kin)
    assert got.group_votes == {"norm/triton": 2}
    assert got.point_votes == {"new__norm_triton_t512": 2}
    assert _first_template(options, kin).name == "new__norm_triton_t512"


def _problem(root: Path, name: str, scale: int = 1) -> Path:
    """A copy of the rmsnorm fixture named ``name``; ``scale`` multiplies its token counts (another size class)."""
    dst = root / name
    shutil.copytree(FIXTURE, dst)
    d = json.loads((dst / "definition.json").read_text())
    d["name"] = name
    (dst / "definition.json").write_text(json.dumps(d))
    lines = []
    for line in (dst / "workload.jsonl").read_text().splitlines():
        w = json.loads(line)
        w["axes"]["T"] *= scale
        lines.append(json.dumps(w))
    (dst / "workload.jsonl").write_text("\n".join(lines) + "\n")
    return dst


def _judged(store: ResultStore, data: Path, run: str, problem: Path, latencies: dict[str, float | None]) -> None:
    now = datetime.now(timezone.utc)
    name = load_problem(problem).name
    store.append("problems", [{"run_id": run, "problem": name, "path": str(problem), "op_type": "rmsnorm",
                               "workloads": 1, "created_at": now}])  # fmt: skip
    cands, traces = [], []
    for i, (key, latency) in enumerate(latencies.items()):
        cid = f"c{i:04d}-{name}"
        path = solution_file(data, run, cid)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"name": f"{name}__{key}"}))
        cands.append({"run_id": run, "candidate_id": cid, "problem": name, "attempt": i, "agent": "offline",
                      "language": "cuda_cpp", "source_hash": "h", "tokens_in": 0, "tokens_out": 0, "cost_usd": 0.0,
                      "created_at": now})  # fmt: skip
        traces.append({"run_id": run, "candidate_id": cid, "problem": name, "workload_uuid": "w0",
                       "status": "PASSED" if latency else "INCORRECT_NUMERICAL", "latency_ms": latency,
                       "device": "cuda:0", "created_at": now})  # fmt: skip
    store.append("candidates", cands)
    store.append("traces", traces)


def test_a_new_run_plans_first_the_point_that_won_on_another_problem_of_its_size(tmp_path):
    data, problems = tmp_path / "data", tmp_path / "problems"
    kin_dir, new_dir, big_dir = _problem(problems, "rms_kin"), _problem(problems, "rms_new"), _problem(problems, "rms_big", 4096)
    new, big = load_problem(new_dir), load_problem(big_dir)
    assert size_class(new) == size_class(load_problem(kin_dir)) != size_class(big)
    cuda = [p for p in plan(new, "cuda:0") if p.group.startswith("rmsnorm/cuda_cpp")]
    first, later = variant_key(cuda[0].name), variant_key(cuda[3].name)
    store = ResultStore(data)
    _judged(store, data, "r1", kin_dir, {first: 2.0, later: 1.0})
    _judged(store, data, "r1", big_dir, {first: 1.0, later: 9.0})  # another size class: the reverse

    table = KinTable.from_store(data)
    assert table.kin(new, "cuda:0") == {"rms_kin": {first: 2.0, later: 1.0}}
    assert table.kin(new, "cpu") == {}  # measured on another kind of device
    [state] = load_states(data, "r2", [new], device="cuda:0").values()
    assert state.kin == {"rms_kin": {first: 2.0, later: 1.0}}

    def first_cuda(agent: OfflineAgent):
        history = []
        while (c := agent.propose(new, history, "cuda:0")) is not None:
            if c.language == "cuda_cpp":
                return c
            history.append(AttemptFeedback(f"c{len(history)}", c.solution, (WorkloadFeedback("w0", "PASSED", 1.0),)))
        raise AssertionError("no CUDA template planned")

    picked = first_cuda(OfflineAgent(kin=state.kin))
    assert picked.solution.name == cuda[3].name and "planned first" in picked.notes
    assert first_cuda(OfflineAgent()).solution.name == cuda[0].name  # no kin: plan order
