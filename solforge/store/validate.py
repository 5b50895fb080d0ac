"""great-expectations checks run on every batch before it is written.

Per table: the columns match the schema in order, required columns are filled, statuses are verdicts,
times are positive, the key is unique within the batch and, for traces, the SOL score agrees with the
times it was computed from. great-expectations is imported on first use (it takes seconds to import).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from .schema import STATUSES, TableSpec

SOL_TOLERANCE = 1e-6


def sol_score(t_k: float, t_b: float, t_sol: float) -> float | None:
    """S = 1 / (1 + (t_k - t_sol) / (t_b - t_sol)), with the judge's guards (``sol_bench.score``)."""
    if t_k <= 0 or t_b <= 0 or t_sol < 0:
        return None
    from sol_bench.score import sol_score as _score

    return _score(t_k, t_b, t_sol).sol_score


@dataclass(frozen=True)
class ValidationReport:
    """The outcome of validating one batch; ``details`` is great-expectations' own JSON result."""

    table: str
    success: bool
    failed: tuple[str, ...] = ()
    details: dict[str, Any] = field(default_factory=dict)


def _sol_errors(table: pa.Table) -> list[float | None]:
    cols = {c: table.column(c).to_pylist() for c in ("latency_ms", "t_b_ms", "t_sol_ms", "sol_score")}
    out: list[float | None] = []
    for t_k, t_b, t_sol, s in zip(cols["latency_ms"], cols["t_b_ms"], cols["t_sol_ms"], cols["sol_score"]):
        if s is None:
            out.append(None)
            continue
        if s is not None and (t_k is None or t_b is None or t_sol is None):
            out.append(math.inf)  # a score with nothing to justify it
            continue
        expected = sol_score(t_k, t_b, t_sol)
        out.append(math.inf if expected is None else abs(expected - s))
    return out


class BatchValidator:
    """Holds one ephemeral great-expectations context and one suite per table, built on first use."""

    def __init__(self) -> None:
        self._ctx: Any = None
        self._defs: dict[str, Any] = {}

    def _context(self) -> Any:
        if self._ctx is None:
            import logging

            import great_expectations as gx
            from great_expectations.data_context.types.base import ProgressBarsConfig

            # One INFO line per batch about a temporary docs site would bury the run's own progress.
            logging.getLogger("great_expectations").setLevel(logging.WARNING)
            self._ctx = gx.get_context(mode="ephemeral")
            self._ctx.variables.progress_bars = ProgressBarsConfig(globally=False)
        return self._ctx

    def _definition(self, spec: TableSpec, columns: list[str]) -> Any:
        if spec.name in self._defs:
            return self._defs[spec.name]
        import great_expectations as gx

        ctx = self._context()
        ex = gx.expectations
        asset = ctx.data_sources.add_pandas(f"ds_{spec.name}").add_dataframe_asset(f"asset_{spec.name}")
        batch = asset.add_batch_definition_whole_dataframe(f"batch_{spec.name}")
        suite = ctx.suites.add(gx.ExpectationSuite(name=f"suite_{spec.name}"))
        suite.add_expectation(ex.ExpectTableColumnsToMatchOrderedList(column_list=columns))
        for f in spec.schema:
            if not f.nullable:
                suite.add_expectation(ex.ExpectColumnValuesToNotBeNull(column=f.name))
        if spec.status_column:
            suite.add_expectation(ex.ExpectColumnValuesToBeInSet(column=spec.status_column, value_set=list(STATUSES)))
        for c in spec.positive:
            suite.add_expectation(ex.ExpectColumnValuesToBeBetween(column=c, min_value=0, strict_min=True))
        suite.add_expectation(ex.ExpectCompoundColumnsToBeUnique(column_list=list(spec.key)))
        if "sol_score" in spec.columns:
            suite.add_expectation(ex.ExpectColumnValuesToBeBetween(column="sol_score", min_value=0, max_value=1))
            suite.add_expectation(
                ex.ExpectColumnValuesToBeBetween(column="_sol_score_error", min_value=0, max_value=SOL_TOLERANCE)
            )
        vd = ctx.validation_definitions.add(
            gx.ValidationDefinition(name=f"validate_{spec.name}", data=batch, suite=suite)
        )
        self._defs[spec.name] = vd
        return vd

    def validate(self, spec: TableSpec, table: pa.Table) -> ValidationReport:
        columns = list(table.column_names)
        expected_columns = list(spec.columns)
        df = table.to_pandas()
        if "sol_score" in spec.columns and "sol_score" in columns:
            df["_sol_score_error"] = _sol_errors(table)
            expected_columns.append("_sol_score_error")
            columns.append("_sol_score_error")
        vd = self._definition(spec, expected_columns)
        result = vd.run(batch_parameters={"dataframe": df})
        details = result.to_json_dict()
        failed = tuple(
            f"{r['expectation_config']['type']}({r['expectation_config']['kwargs'].get('column') or r['expectation_config']['kwargs'].get('column_list')})"
            for r in details["results"]
            if not r["success"]
        )
        return ValidationReport(table=spec.name, success=bool(result.success), failed=failed, details=details)
