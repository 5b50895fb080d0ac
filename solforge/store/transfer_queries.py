"""What every earlier run measured of each judged candidate, for transferring winners to other problems:
per (run, candidate) its problem, where the problem lives, the device kind it was judged on, whether it passed
every workload and its geometric-mean latency over them."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from .query import query
from .report_queries import solution_file

_JUDGED_SQL = """
WITH judged AS (
  SELECT t.run_id, t.candidate_id, any_value(t.problem) AS problem,
         CASE WHEN any_value(t.device) LIKE 'cuda%' THEN 'cuda' ELSE 'cpu' END AS device_kind,
         bool_and(t.status = 'PASSED') AS passed,
         exp(avg(ln(t.latency_ms)) FILTER (WHERE t.latency_ms > 0)) AS latency_ms
  FROM traces t GROUP BY t.run_id, t.candidate_id
),
paths AS (SELECT run_id, problem, any_value(path) AS path FROM problems GROUP BY ALL)
SELECT j.*, p.path AS problem_path
FROM judged j LEFT JOIN paths p ON p.run_id = j.run_id AND p.problem = j.problem
ORDER BY j.run_id, j.candidate_id
"""


@dataclass(frozen=True)
class JudgedCandidate:
    run_id: str
    candidate_id: str
    problem: str
    problem_path: str | None
    device_kind: str  # 'cuda' or 'cpu'
    passed: bool
    latency_ms: float | None  # geometric mean over its workloads; None when no workload was timed
    solution_name: str | None  # from the stored solution file; None when the file is gone


def judged_candidates(data_dir: Path | str) -> list[JudgedCandidate]:
    """Every candidate any run in ``data_dir`` judged, with the name of its stored solution."""
    return [
        JudgedCandidate(**r, solution_name=_solution_name(solution_file(data_dir, r["run_id"], r["candidate_id"])))
        for r in query(data_dir, _JUDGED_SQL).to_pylist()
    ]


def _solution_name(path: Path) -> str | None:
    try:
        return json.loads(path.read_text()).get("name")
    except (OSError, ValueError, AttributeError):
        return None
