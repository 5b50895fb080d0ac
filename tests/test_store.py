"""The results store: schema, validated atomic writes, idempotent keys, rejected batches, DuckDB views."""

from __future__ import annotations

import json

import duckdb
import pyarrow.parquet as pq
import pytest

from solforge.store import TABLES, ResultStore
from solforge.store.query import connect, query
from solforge.store.validate import sol_score


def _trace(wl: str, **kw):
    t_k, t_b, t_sol = 1.0, 2.0, 0.5
    row = dict(run_id="r1", candidate_id="c1", problem="p", workload_uuid=wl, status="PASSED", latency_ms=t_k,
               eager_ms=3.0, t_b_ms=t_b, t_sol_ms=t_sol, speedup=t_b / t_k, speedup_vs_eager=3.0 / t_k,
               sol_score=sol_score(t_k, t_b, t_sol))
    return row | kw


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    s = ResultStore(tmp_path_factory.mktemp("data"))
    s.ensure_layout()
    return s


def test_empty_tables_query_without_error(store):
    for name in TABLES:
        assert query(store.data_dir, f"SELECT count(*) AS n FROM {name}").to_pylist() == [{"n": 0}]


def test_append_writes_one_partitioned_file_and_skips_stored_keys(store):
    r = store.append("traces", [_trace("w1"), _trace("w2")])
    assert r.ok and r.written == 2 and r.skipped == 0
    assert r.path.parent.name == "run_id=r1" and r.path.name.startswith("part-")
    r2 = store.append("traces", [_trace("w2"), _trace("w3")])
    assert (r2.written, r2.skipped) == (1, 1)
    got = query(store.data_dir, "SELECT workload_uuid FROM traces ORDER BY 1").column(0).to_pylist()
    assert got == ["w1", "w2", "w3"]
    assert not list(store.data_dir.rglob("*.tmp")), "temp files must be renamed away"
    schema = pq.read_schema(r.path)
    assert schema.field("status").type == "string" and schema.field("latency_ms").type == "double"


@pytest.mark.parametrize(
    "bad, expectation",
    [
        (dict(status="ALMOST_PASSED"), "expect_column_values_to_be_in_set(status)"),
        (dict(latency_ms=-1.0, speedup=-2.0, sol_score=None), "expect_column_values_to_be_between(latency_ms)"),
        (dict(sol_score=0.99), "expect_column_values_to_be_between(_sol_score_error)"),
    ],
)
def test_bad_batch_is_kept_aside_with_its_report(store, bad, expectation):
    r = store.append("traces", [_trace("bad-1", **bad)])
    assert not r.ok and r.written == 0
    assert expectation in r.report.failed
    assert r.rejected.exists() and "rejected" in r.rejected.parts
    report = json.loads(r.rejected.with_suffix(".report.json").read_text())
    assert report["success"] is False and expectation in report["failed"]
    assert query(store.data_dir, "SELECT count(*) n FROM traces WHERE workload_uuid = 'bad-1'").to_pylist() == [{"n": 0}]


def test_duplicate_key_inside_a_batch_is_rejected(store):
    r = store.append("traces", [_trace("dup", candidate_id="c9"), _trace("dup", candidate_id="c9")])
    assert not r.ok and any("compound_columns_to_be_unique" in f for f in r.report.failed)


def test_row_of_the_wrong_type_is_rejected_not_raised(store):
    r = store.append("traces", [_trace("typed", latency_ms="fast")])
    assert not r.ok and r.rejected.suffix == ".json"
    assert json.loads(r.rejected.read_text())["rows"][0]["latency_ms"] == "fast"


def test_views_sql_opens_the_same_views_in_a_fresh_duckdb(store):
    con = duckdb.connect()
    con.execute((store.data_dir / "views.sql").read_text())
    n = con.sql("SELECT count(*) FROM traces").fetchall()[0][0]
    con.close()
    con2 = connect(store.data_dir)
    assert n == con2.cursor().sql("SELECT count(*) FROM traces").fetchall()[0][0] >= 3
    con2.close()


def test_tables_never_land_in_the_problem_folder_of_the_data_dir(tmp_path):
    # The bundled problem set lives in data/problems/: a query over a fresh data dir must not write there.
    problems = tmp_path / "problems" / "L1" / "some_problem"
    problems.mkdir(parents=True)
    (problems / "definition.json").write_text("{}")
    query(tmp_path, "SELECT count(*) AS n FROM problems")
    assert sorted(p.name for p in (tmp_path / "problems").rglob("*")) == ["L1", "definition.json", "some_problem"]
    assert (tmp_path / "tables" / "problems" / "_schema.parquet").is_file()
