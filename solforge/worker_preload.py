"""Dask worker preload: import the heavy libraries while the worker starts, not in its first task."""

import great_expectations  # noqa: F401
import prefect  # noqa: F401
import torch  # noqa: F401

import sol_bench.models  # noqa: F401
import tasks.store  # noqa: F401
