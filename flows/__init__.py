"""Prefect flows: per-problem optimization, the planned campaign, baselines, evaluation and the report."""
