"""``solforge report`` and ``solforge export`` over a small campaign written straight into the tables."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from html.parser import HTMLParser
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from solforge.cli import cli
from solforge.store import ResultStore
from solforge.store import report_queries as rq
from solforge.store.validate import sol_score

REPO = Path(__file__).resolve().parents[1]
RMS = REPO / "tests" / "fixtures" / "problems" / "rmsnorm_small"
HONEST = json.loads((REPO / "tests" / "fixtures" / "solutions" / "rmsnorm_pytorch.json").read_text())
T0 = datetime(2025, 1, 1, tzinfo=timezone.utc)
KINDS = {"rmsnorm_small": "rmsnorm", "softmax_x": "softmax", "gemm_y": "gemm"}


def _solution(name: str, problem: str, lang: str, code: str, file: str = "kernel.py") -> dict:
    return {"name": name, "definition": problem, "spec": {"languages": [lang], "entry_point": f"{file}::run"},
            "sources": [{"path": file, "content": code}]}  # fmt: skip


def _trace(run: str, cid: str, problem: str, wl: str, status: str = "PASSED", t_k: float = 1.0, t_b: float = 2.0,
           t_sol: float = 0.5, device: str = "cpu") -> dict:  # fmt: skip
    row = dict(run_id=run, candidate_id=cid, problem=problem, workload_uuid=wl, status=status, device=device,
               judge_s=1.5)  # fmt: skip
    if status == "PASSED":
        row |= dict(latency_ms=t_k, eager_ms=t_b * 1.2, t_b_ms=t_b, t_sol_ms=t_sol, speedup=t_b / t_k,
                    speedup_vs_eager=t_b * 1.2 / t_k, sol_score=sol_score(t_k, t_b, t_sol))  # fmt: skip
    else:
        row["reason"] = "wrong output"
    return row


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    """Run r1: rmsnorm_small (a failure, a slow pass, the honest winner judged on T=1 and T=7 only), softmax_x
    (a pass whose problem directory is gone), gemm_y (never passes). Run r2: one weaker rmsnorm pass."""
    data = tmp_path_factory.mktemp("data")
    store = ResultStore(data)
    cands: dict[str, list[dict]] = {"r1": [], "r2": []}
    traces: dict[str, list[dict]] = {"r1": [], "r2": []}

    def cand(run: str, problem: str, attempt: int, lang: str, solution: dict, minutes: float,
             cost: float = 0.01) -> str:  # fmt: skip
        cid = f"c{attempt}-{problem}"
        f = rq.solution_file(data, run, cid)
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(json.dumps(solution))
        cands[run].append(dict(run_id=run, candidate_id=cid, problem=problem, attempt=attempt, agent="offline",
                               language=lang, model="m", source_hash="h" + cid, tokens_in=100, tokens_out=50,
                               cost_usd=cost, created_at=T0 + timedelta(minutes=minutes)))  # fmt: skip
        return cid

    slow = HONEST | {"name": "rms_slow"}
    zeros = _solution("zeros", "rmsnorm_small", "pytorch", "def run(x, weight, eps, y):\n    y.zero_()\n")
    c = cand("r1", "rmsnorm_small", 0, "pytorch", zeros, 1)
    traces["r1"] += [_trace("r1", c, "rmsnorm_small", w, "INCORRECT_NUMERICAL") for w in ("rms-1", "rms-7")]
    c = cand("r1", "rmsnorm_small", 1, "pytorch", slow, 2)
    traces["r1"] += [_trace("r1", c, "rmsnorm_small", w, t_k=1.8) for w in ("rms-1", "rms-7")]
    c = cand("r1", "rmsnorm_small", 2, "pytorch", HONEST, 4)
    traces["r1"] += [_trace("r1", c, "rmsnorm_small", w, t_k=0.9) for w in ("rms-1", "rms-7")]
    c = cand("r1", "softmax_x", 0, "triton", _solution("sm", "softmax_x", "triton", "import triton\n"), 3, cost=0.05)
    traces["r1"] += [_trace("r1", c, "softmax_x", "s1", t_k=0.5, t_b=3.0, t_sol=0.2, device="cuda:0")]
    c = cand("r1", "softmax_x", 1, "triton", _solution("sm2", "softmax_x", "triton", "import triton\n"), 5)
    traces["r1"] += [_trace("r1", c, "softmax_x", "s1", "RUNTIME_ERROR")]
    c = cand("r1", "gemm_y", 0, "cuda_cpp", _solution("g", "gemm_y", "cuda_cpp", "// c++\n", "k.cu"), 2)
    traces["r1"] += [_trace("r1", c, "gemm_y", "g1", "COMPILE_ERROR")]
    c = cand("r2", "rmsnorm_small", 0, "pytorch", slow, 30)
    traces["r2"] += [_trace("r2", c, "rmsnorm_small", w, t_k=1.5) for w in ("rms-1", "rms-7", "rms-64")]
    for run, problems in (("r1", list(KINDS)), ("r2", ["rmsnorm_small"])):
        assert store.append("candidates", cands[run]).ok
        assert store.append("traces", traces[run]).ok
        assert store.append("problems", [
            dict(run_id=run, problem=p, path=str(RMS) if p == "rmsnorm_small" else f"/gone/{p}", op_type=KINDS[p],
                 workloads=3) for p in problems]).ok  # fmt: skip
    assert store.append("runs", [
        dict(run_id="r1", event="start", agent="offline", language="pytorch", model="m", device="cpu", problems=3,
             created_at=T0),
        dict(run_id="r1", event="end", device="cpu", problems=3, wall_s=360.0, created_at=T0 + timedelta(minutes=6)),
    ]).ok  # fmt: skip
    return data


def test_winner_is_the_best_passing_candidate_over_the_runs_asked_for(data):
    assert rq.run_ids(data) == ["r1", "r2"]
    won = {w.problem: w for w in rq.winners(data, ["r1", "r2"])}
    assert set(won) == {"rmsnorm_small", "softmax_x"}, "gemm_y never passed"
    assert (won["rmsnorm_small"].run_id, won["rmsnorm_small"].candidate_id) == ("r1", "c2-rmsnorm_small")
    assert won["rmsnorm_small"].problem_path == str(RMS) and won["rmsnorm_small"].op_type == "rmsnorm"
    assert won["rmsnorm_small"].sol_score == pytest.approx(sol_score(0.9, 2.0, 0.5))
    assert [w.candidate_id for w in rq.winners(data, ["r2"])] == ["c0-rmsnorm_small"]
    assert [w.problem for w in rq.winners(data, ["r1"], problems=["softmax_x"])] == ["softmax_x"]
    by_id = {(c.run_id, c.candidate_id): c for c in rq.candidate_results(data, ["r1"])}
    failed = by_id["r1", "c0-rmsnorm_small"]
    assert failed.status == "INCORRECT_NUMERICAL" and not failed.passed
    assert by_id["r1", "c0-gemm_y"].gpu_s == pytest.approx(1.5)


def test_solution_file_is_where_the_campaign_stores_solutions(tmp_path):
    from agents.base import Candidate
    from sol_bench.models import Solution
    from tasks.common import Generated
    from tasks.store import store_candidate

    solution = Solution.model_validate(HONEST)
    generated = Generated(candidate=Candidate(solution=solution, agent="offline", language="pytorch"), seconds=0.1)
    assert store_candidate.fn(str(tmp_path), "r", "c1", "rmsnorm_small", 0, generated).written == 1
    assert Solution.model_validate_json(rq.solution_file(tmp_path, "r", "c1").read_text()) == solution


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.images: list[str] = []
        self.links: list[str] = []
        self.scripts = 0
        self.in_winners = False
        self.winner_rows: list[list[str]] = []

    def handle_starttag(self, tag, attrs):  # noqa: ANN001
        a = dict(attrs)
        if tag == "img":
            self.images.append(a.get("src", ""))
        elif tag == "a":
            self.links.append(a.get("href", ""))
        elif tag == "script":
            self.scripts += 1
        elif tag == "table" and a.get("id") == "winners":
            self.in_winners = True
        elif tag == "tr" and self.in_winners:
            self.winner_rows.append([])

    def handle_endtag(self, tag):  # noqa: ANN001
        if tag == "table":
            self.in_winners = False

    def handle_data(self, text):  # noqa: ANN001
        if self.in_winners and self.winner_rows and text.strip():
            self.winner_rows[-1].append(text.strip())


@pytest.fixture(scope="module")
def report_dir(data, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("report")
    r = CliRunner().invoke(cli, ["report", "--data-dir", str(data), "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert Path(r.output.strip()) == out / "index.html"
    return out


def test_report_holds_the_figures_and_the_winners_with_their_files(report_dir):
    html = (report_dir / "index.html").read_text()
    page = _Page()
    page.feed(html)
    assert page.scripts == 0 and "http://" not in html and "https://" not in html, "the page must fetch nothing"
    assert len(page.images) == 5, "per problem, distribution, best so far, by group, cost"
    for src in page.images:
        assert src.startswith("data:image/svg+xml;base64,")
        svg = base64.b64decode(src.split(",", 1)[1]).decode()
        assert "<svg" in svg and svg.count("<path") > 20, "a figure with drawn content"
    rows = {r[0]: r for r in page.winner_rows[1:]}
    assert set(rows) == {"rmsnorm_small", "softmax_x"}
    assert "c2-rmsnorm_small" in rows["rmsnorm_small"] and "0.789" in rows["rmsnorm_small"]
    for link in page.links:
        assert (report_dir / link).is_file(), link
    assert "winners/rmsnorm_small/kernel.py" in page.links and "winners/softmax_x/traces.jsonl" in page.links
    assert (report_dir / "winners/rmsnorm_small/kernel.py").read_text() == HONEST["sources"][0]["content"]
    traces = [json.loads(line) for line in (report_dir / "winners/rmsnorm_small/traces.jsonl").read_text().splitlines()]
    assert [t["workload_uuid"] for t in traces] == ["rms-1", "rms-7"]
    assert "No passing candidate: gemm_y" in html


def test_report_of_one_run_and_of_no_run(data, tmp_path):
    from solforge.report import ReportError, build_report

    html = build_report(data, tmp_path / "r2", ["r2"]).read_text()
    assert "c0-rmsnorm_small" in html and "softmax_x" not in html
    with pytest.raises(ReportError, match="no run has stored a candidate"):
        build_report(tmp_path / "empty", tmp_path / "none")


@pytest.mark.skipif(shutil.which("chromium") is None, reason="no chromium binary")
def test_report_renders_in_headless_chromium(report_dir, tmp_path):
    from PIL import Image

    shot = tmp_path / "report.png"
    subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    "--window-size=1200,3200", f"--screenshot={shot}", (report_dir / "index.html").as_uri()],
                   capture_output=True, timeout=120, check=True)  # fmt: skip
    img = Image.open(shot).convert("RGB")
    # the figures' bars are drawn in the report's blue (#2a7ab0): a page whose images failed shows none
    blue = sum(n for n, (r, g, b) in img.getcolors(maxcolors=1 << 24) if abs(r - 42) + abs(g - 122) + abs(b - 176) < 12)
    assert blue > 20_000, f"only {blue} pixels of the figures' blue"


@pytest.fixture(scope="module")
def exported(data, tmp_path_factory) -> tuple[Path, object]:
    out = tmp_path_factory.mktemp("export")
    r = CliRunner().invoke(cli, ["export", "--data-dir", str(data), "-o", str(out)])
    return out, r


def test_export_names_what_it_could_not_export(exported):
    out, r = exported
    assert r.exit_code == 1, "softmax_x's problem directory is gone"
    assert "softmax_x: problem directory not found (/gone/softmax_x)" in r.output
    assert (out / "solutions/rmsnorm_small/solution.json").is_file() and not (out / "solutions/softmax_x").exists()


def test_exported_solution_passes_solforge_eval(exported):
    out, _ = exported
    sol = out / "solutions" / "rmsnorm_small" / "solution.json"
    assert json.loads(sol.read_text())["sources"] == HONEST["sources"]
    proc = subprocess.run([sys.executable, "-m", "solforge", "eval", str(RMS), "--solution", str(sol), "--json",
                           "--iterations", "3", "--warmup", "1", "--max-workloads", "1", "--timeout", "120"],
                          capture_output=True, text=True, timeout=240, cwd=REPO)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    traces = [json.loads(line) for line in proc.stdout.splitlines()]
    assert traces and all(t["evaluation"]["status"] == "PASSED" for t in traces)


def test_exported_package_runs_the_winner_on_judged_shapes_and_the_reference_elsewhere(exported, monkeypatch):
    from torch._subclasses.fake_tensor import FakeTensorMode

    out, _ = exported
    monkeypatch.syspath_prepend(str(out))
    import solforge_kernels

    op = torch.ops.solforge_kernels.rmsnorm_small
    assert solforge_kernels.OPS["rmsnorm_small"] is solforge_kernels.rmsnorm_small.op
    rt = solforge_kernels.rmsnorm_small.runtime
    ref = rt.reference()
    w = torch.randn(256, dtype=torch.bfloat16)

    x = torch.randn(7, 256, dtype=torch.bfloat16)  # workload rms-7: judged
    y = op(x, w, 1e-6)
    assert rt.calls == {"kernel": 1, "reference": 0}
    torch.testing.assert_close(y, ref(x, w, 1e-6), atol=1e-2, rtol=2e-2)

    x64 = torch.randn(64, 256, dtype=torch.bfloat16)  # workload rms-64: never judged for this winner
    assert torch.equal(op(x64, w, 1e-6), ref(x64, w, 1e-6))
    assert rt.calls == {"kernel": 1, "reference": 1}
    op(x, w, 1e-3)  # an eps the workloads never fixed
    op(torch.randn(256, 7, dtype=torch.bfloat16).t(), w, 1e-6)  # judged shape, but not contiguous
    assert rt.calls == {"kernel": 1, "reference": 3}

    with FakeTensorMode():  # tracing (torch.compile) sees output shapes without running anything
        fw = torch.empty(256, dtype=torch.bfloat16)
        assert op(torch.empty(7, 256, dtype=torch.bfloat16), fw, 1e-6).shape == (7, 256)
        assert op(torch.empty(5, 256, dtype=torch.bfloat16), fw, 1e-6).shape == (5, 256)
    assert rt.calls == {"kernel": 1, "reference": 3}


def test_campaign_report_flow_writes_the_html_and_links_it(data, monkeypatch):
    import flows.report as report_flow

    made: list[dict] = []
    monkeypatch.setattr(report_flow, "create_markdown_artifact", lambda **kw: made.append(kw))
    index = Path(report_flow.html_report(str(data), "r1"))
    assert index == (data / "reports" / "r1" / "index.html").resolve() and index.is_file()
    assert made[0]["key"] == "html-report-r1" and index.as_uri() in made[0]["markdown"]
