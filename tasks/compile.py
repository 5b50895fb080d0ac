"""compile: stage a candidate on a CPU worker and catch what fails without a device.

Python-family sources are byte-compiled (a syntax error is a COMPILE_ERROR with no device time spent);
every candidate gets its source hash. C++ candidates are built by the judge itself, whose build cache is
keyed by the sources, so a second judge of the same source does not rebuild.
"""

from __future__ import annotations

import time

from prefect import task
from prefect.cache_policies import NO_CACHE

from sol_bench.models import Solution
from solforge.store.rows import source_hash

from .common import Compiled, Generated


def check_sources(solution: Solution) -> str | None:
    if solution.spec.is_cpp:
        return None
    for src in solution.sources:
        if not src.path.endswith(".py"):
            continue
        try:
            compile(src.content, src.path, "exec", dont_inherit=True)
        except SyntaxError as e:
            return f"{src.path}:{e.lineno}: {e.msg}"
        except ValueError as e:  # e.g. NUL bytes in the source
            return f"{src.path}: {e}"
    return None


@task(name="compile", cache_policy=NO_CACHE)
def compile_candidate(generated: Generated | Solution | None) -> Compiled | None:
    if isinstance(generated, Generated):
        if generated.candidate is None:
            return None
        solution = generated.candidate.solution
    elif generated is None:
        return None
    else:
        solution = generated
    t0 = time.monotonic()
    error = check_sources(solution)
    return Compiled(solution=solution, source_hash=source_hash(solution), error=error, seconds=time.monotonic() - t0)
