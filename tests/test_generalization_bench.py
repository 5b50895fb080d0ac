"""bench/generalization.py's summary: the headline numbers come from the agents' records and the problems' kinds."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _problem(root: Path, name: str, kind: str) -> None:
    d = root / "L1" / name
    d.mkdir(parents=True)
    (d / "definition.json").write_text(json.dumps({"name": name, "op_type": "x", "tags": [f"kind:{kind}", "generated"]}))


def test_summary_counts_real_candidates_regressions_hacks_and_crashes(tmp_path: Path) -> None:
    problems, work = tmp_path / "problems", tmp_path / "work"
    for name, kind in [("a", "rmsnorm"), ("b", "rmsnorm"), ("c", "attention"), ("d", "attention"), ("e", "moe"),
                       ("f", "moe")]:
        _problem(problems, name, kind)
    work.mkdir()
    records = [
        {"problem": "a", "best": "ref_eager_cudagraph", "passed": 2, "tried": 3, "vs_tb": 1.5, "sol_score": 0.7,
         "statuses": {"ref_eager_cudagraph": ["PASSED"], "ref_exported": ["REWARD_HACK"]}},
        {"problem": "b", "best": "ref_eager", "passed": 1, "tried": 1, "vs_tb": 0.5, "sol_score": 0.3},
        {"problem": "c", "best": "attention_triton", "passed": 1, "tried": 2, "vs_tb": 2.0, "sol_score": 0.8},
        {"problem": "d", "best": None, "passed": 0, "tried": 0, "error": "RuntimeError: boom"},
        {"problem": "f", "best": "ref_eager", "passed": 2, "tried": 2, "vs_tb": 1.0, "sol_score": 0.5,
         "statuses": {"ref_eager": ["PASSED"], "ref_tuned": ["PASSED"]}},  # the tuned one passed, eager read faster
    ]  # "e" never reached
    (work / "agents.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    out = tmp_path / "table.md"
    subprocess.run([sys.executable, "bench/generalization.py", str(problems), "--steps", "summary", "--work", str(work),
                    "-o", str(out)], cwd=REPO, check=True, capture_output=True)  # fmt: skip
    h = json.loads((work / "headline.json").read_text())
    assert h["problems"] == 6
    assert h["real_candidate"] == 3  # a, c and f; b's only passing candidate is the bare reference
    assert h["with_tb"] == 4 and h["above_tb"] == 2 and h["under_floor"] == 1
    assert abs(h["geomean_vs_tb"] - (1.5 * 0.5 * 2.0 * 1.0) ** (1 / 4)) < 1e-9
    assert h["median_sol"] == 0.6
    assert h["reward_hacks"] == 1 and h["crashed"] == 2  # d raised, e was never reached
    text = out.read_text()
    assert "| attention | 2 | 1 |" in text and "RuntimeError: boom" in text and "not reached" in text


def _module(monkeypatch):
    import importlib.util

    monkeypatch.syspath_prepend(str(REPO / "bench"))
    spec = importlib.util.spec_from_file_location("bench_generalization", REPO / "bench" / "generalization.py")
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def test_gpus_deal_problems_into_shards_one_gpu_each_and_the_summary_reads_them_all(tmp_path: Path, monkeypatch) -> None:
    problems, work = tmp_path / "problems", tmp_path / "work"
    for name in "abcde":
        _problem(problems, name, "rmsnorm")
    gen = _module(monkeypatch)
    assert [[d.name for d in s] for s in gen.shards([problems], 2)] == [["a", "c", "e"], ["b", "d"]]
    assert len(gen.shards([problems], 9)) == 5  # no empty shard

    started = []

    class Child:
        def __init__(self, cmd, env, **kw):
            started.append((cmd, env["CUDA_VISIBLE_DEVICES"]))
            shard = Path(cmd[cmd.index("--work") + 1])
            mine = [Path(a).name for a in cmd[2 : cmd.index("--device")]]
            (shard / "agents.jsonl").write_text("".join(json.dumps(
                {"problem": n, "best": "x", "passed": 1, "tried": 1, "vs_tb": 2.0, "sol_score": 0.6}) + "\n"
                for n in mine if n != "e"))  # fmt: skip

        def wait(self, timeout=None):
            return 0

    monkeypatch.setattr(gen.subprocess, "Popen", Child)
    out = tmp_path / "t.md"
    monkeypatch.setattr(sys, "argv", ["generalization.py", str(problems), "--gpus", "2", "--work", str(work),
                                      "--steps", "tb,agents,summary", "-o", str(out)])  # fmt: skip
    assert gen.main() == 0
    assert [gpu for _, gpu in started] == ["0", "1"]
    assert all(c[c.index("--steps") + 1] == "tb,agents" and c[c.index("--device") + 1] == "cuda" for c, _ in started)
    h = json.loads((work / "headline.json").read_text())
    assert h["problems"] == 5 and h["real_candidate"] == 4 and h["crashed"] == 1  # e: its shard wrote no record


def test_summary_says_per_subgraph_family_where_it_was_tried_passed_won_and_its_speed(tmp_path: Path, monkeypatch) -> None:
    gen = _module(monkeypatch)
    ms = {"w1": 1.0, "w2": 4.0}
    records = [
        # the subgraph candidate is the best: its vs T_b is the record's
        {"problem": "a", "best": "subgraph_rmsnorm_gated", "vs_tb": 1.5, "latencies_ms": ms,
         "statuses": {"ref_eager_cudagraph": ["PASSED"], "subgraph_rmsnorm_gated": ["PASSED"]},
         "tried_ms": {"ref_eager_cudagraph": {"w1": 2.0, "w2": 8.0}, "subgraph_rmsnorm_gated": ms}},
        # a template won; the subgraph candidate took twice as long on every workload: half the best's vs T_b
        {"problem": "b", "best": "rmsnorm_triton", "vs_tb": 2.0, "latencies_ms": ms,
         "statuses": {"rmsnorm_triton": ["PASSED"], "subgraph_rmsnorm": ["PASSED"]},
         "tried_ms": {"rmsnorm_triton": ms, "subgraph_rmsnorm": {"w1": 2.0, "w2": 8.0}}},
        # tried and failed
        {"problem": "c", "best": "ref_eager_cudagraph", "vs_tb": 1.0, "latencies_ms": ms,
         "statuses": {"ref_eager_cudagraph": ["PASSED"], "subgraph_attention": ["INCORRECT_NUMERICAL"]}},
        {"problem": "d", "best": None, "statuses": {}},
    ]  # fmt: skip
    rows = {r.family: r for r in gen.family_rows(records, ("rmsnorm", "gated", "attention", "rope"))}
    assert (rows["rmsnorm"].tried, rows["rmsnorm"].passed, rows["rmsnorm"].best) == (2, 2, 1)
    assert abs(rows["rmsnorm"].vs_tb - (1.5 * 1.0) ** 0.5) < 1e-9  # geomean of 1.5 (a) and 2.0 / 2 (b)
    assert (rows["gated"].tried, rows["gated"].best, rows["gated"].vs_tb) == (1, 1, 1.5)
    assert (rows["attention"].tried, rows["attention"].passed, rows["attention"].vs_tb) == (1, 0, None)
    assert rows["rope"].tried == 0
    assert "| rmsnorm | 2 | 2 | 1 | 1.22x |" in gen.render_families(list(rows.values()))


def test_a_subgraph_candidates_name_reads_back_as_its_families_though_they_hold_underscores(monkeypatch) -> None:
    gen = _module(monkeypatch)
    known = (*gen.FAMILY_NAMES, *gen.CAPTURE_NAMES)
    assert gen.named_families("subgraph_rmsnorm_bwd", known) == ["rmsnorm_bwd"]  # not rmsnorm
    assert gen.named_families("subgraph_expert_loop_gated_grouped_mm_histogram_routing_index_add", known) == [
        "expert_loop", "gated", "grouped_mm", "histogram", "routing", "index_add"]  # fmt: skip
    assert gen.named_families("subgraph_grouped_routing", known) == ["grouped_routing"]  # not routing
    assert gen.named_families("subgraph_rope_something_new", known) == ["rope", "something_new"]
    ms = {"w1": 1.0}
    record = {"problem": "p", "best": "subgraph_rmsnorm_bwd", "vs_tb": 1.6, "latencies_ms": ms,
              "statuses": {"subgraph_rmsnorm_bwd": ["PASSED"]}, "tried_ms": {"subgraph_rmsnorm_bwd": ms}}
    rows = {r.family: r for r in gen.family_rows([record], gen.FAMILY_NAMES)}
    assert rows["rmsnorm_bwd"].best == 1 and rows["rmsnorm"].tried == 0


def test_the_note_counts_what_the_candidates_said_they_ran(monkeypatch) -> None:
    gen = _module(monkeypatch)
    told = {
        "ref_tuned": ["solforge tuned [(1, 60)]: keeps graph_of_families; graph_of_eager 0.0125 ms",
                      "solforge tuned [(617, 60)]: keeps graph_of_eager; graph_of_families 0.03 ms",
                      "solforge tuned [(16384, 60)]: keeps graph_of_eager; graph_of_families: RuntimeError: x",
                      "solforge graph [(1, 60), (1, 8)]: the eager way not captured, runs eagerly (RuntimeError: x)",
                      "solforge graph [(617, 60), (617, 8)]: the eager way not captured, runs eagerly (RuntimeError: x)"],
        "subgraph_routing": ["solforge subgraph [(1, 60)]: replaced softmax_topk(x; k=8, renormalize=False)",
                             "solforge subgraph [(617, 60)]: replaced nothing (no region reproduced here)",
                             "solforge subgraph [(16384, 60)]: replaced nothing (no region reproduced here)",
                             "solforge graph [(1, 60), (1, 8)]: not captured, runs eagerly (RuntimeError: x)",
                             "solforge way softmax_topk ((1, 60),): keeps triton_2048x4; default 0.01 ms",
                             "solforge way softmax_topk ((617, 60),): keeps default; default 0.02 ms",
                             "solforge into [(1, 60)]: family ops store 2 of 2 outputs themselves"],
    }  # fmt: skip
    # a way the tuned reference only timed is not what it ran: its failed capture is told apart
    assert gen.told_summary(told) == ("ref_tuned kept graph_of_families x1, graph_of_eager x2; "
                                      "ref_tuned could not capture its graph of eager at 2; "
                                      "subgraph_routing replaced nothing at 2 of 3; "
                                      "subgraph_routing family kernels kept at 1 of 2 op shapes; "
                                      "subgraph_routing family ops stored outputs at 1; "
                                      "subgraph_routing ran eagerly (its CUDA graph not captured) at 1")  # fmt: skip
    rec = {"problem": "p", "best": "ref_tuned", "passed": 2, "tried": 2, "vs_tb": 1.1, "told": told}
    [row] = gen.rows({"p": "routing"}, [rec], None)
    assert "replaced nothing at 2 of 3" in gen.render([row], "t") and gen.told_summary({}) == ""


def test_batches_spread_the_kinds_and_a_deadline_leaves_the_rest_skipped_not_crashed(tmp_path: Path, monkeypatch) -> None:
    problems, work = tmp_path / "problems", tmp_path / "work"
    for name, kind in [("a1", "attention"), ("a2", "attention"), ("a3", "attention"), ("m1", "moe"), ("r1", "rmsnorm"),
                       ("r2", "rmsnorm")]:  # fmt: skip
        _problem(problems, name, kind)
    gen = _module(monkeypatch)
    assert [d.name for d in gen.dealt_by_kind([problems])] == ["a1", "m1", "r1", "a2", "r2", "a3"]

    now, ran = [0.0], []

    def steps(batch, steps_, args, work_):
        ran.append([d.name for d in batch])
        with (work_ / "agents.jsonl").open("a") as f:
            f.writelines(json.dumps({"problem": d.name, "best": "k", "passed": 1, "tried": 1, "vs_tb": 1.5}) + "\n"
                         for d in batch)  # fmt: skip
        with (work_ / "tb.jsonl").open("a") as f:
            f.writelines(json.dumps({"problem": d.name, "t_b_ms": 1.0}) + "\n" for d in batch)
        now[0] += 40.0  # each batch takes 40 s
        return {"agents": "exit 1"} if batch[0].name == "r1" else {}

    monkeypatch.setattr(gen, "run_steps", steps)
    monkeypatch.setattr(gen.time, "monotonic", lambda: now[0])
    out = tmp_path / "t.md"
    argv = ["generalization.py", str(problems), "--work", str(work), "--batch", "2", "--deadline", "100", "-o", str(out)]
    monkeypatch.setattr(sys, "argv", argv)
    assert gen.main() == 0
    assert ran == [["a1", "m1"], ["r1", "a2"]]  # a third batch would end at 120 s
    h = json.loads((work / "headline.json").read_text())
    assert h["problems"] == 4 and h["skipped"] == 2 and h["crashed"] == 0 and h["real_candidate"] == 4
    text = out.read_text()
    assert "skipped: deadline" in text and "not started before the deadline: 2" in text
    assert "step batch 2 agents: exit 1" in text

    # a later run on the same work directory goes on with the skipped problems
    now[0], ran[:] = 0.0, []
    monkeypatch.setattr(sys, "argv", [*argv[:-2], "--deadline", "0", "-o", str(out)])
    assert gen.main() == 0
    assert ran == [["r2", "a3"]]  # what both steps recorded starts no process again
    h = json.loads((work / "headline.json").read_text())
    assert h["problems"] == 6 and h["skipped"] == 0
