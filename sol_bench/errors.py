"""Every way judging can fail, and the one verdict each failure maps to.

    SolBenchError
    ├── InputError                 bad files handed to the judge: exit 2, nothing judged
    │   ├── DefinitionError        definition.json (file + field named)
    │   ├── WorkloadError          workload.jsonl (file + line + field named)
    │   └── SolutionError          solution.json (file + field named)
    ├── ReferenceFailure           the problem's own reference broke  -> INVALID_REFERENCE
    ├── CandidateFailure           the candidate lost this workload   -> its ``status``
    │   ├── CompileFailure         -> COMPILE_ERROR
    │   ├── CandidateTimeout       -> TIMEOUT
    │   ├── CandidateCrash         -> RUNTIME_ERROR
    │   ├── WrongShape             -> INCORRECT_SHAPE
    │   ├── WrongDtype             -> INCORRECT_DTYPE
    │   ├── WrongNumbers           -> INCORRECT_NUMERICAL
    │   └── RewardHack             -> REWARD_HACK
    └── JudgeError                 a bug or broken environment in the judge itself

Judges fail closed: an exception that is not a ``CandidateFailure`` raised while checking a candidate
is never turned into PASSED.
"""

from __future__ import annotations

from .models import Status


class SolBenchError(Exception):
    """Root of every error the judge raises on purpose."""


class InputError(SolBenchError):
    """A file handed to the judge is malformed. Names the file and the field."""

    def __init__(self, message: str, *, file: str | None = None, field: str | None = None):
        self.file = file
        self.field = field
        where = ""
        if file:
            where = f"{file}"
            if field:
                where += f": {field}"
            where += ": "
        super().__init__(f"{where}{message}")


class DefinitionError(InputError):
    """definition.json is malformed."""


class WorkloadError(InputError):
    """workload.jsonl is malformed."""


class SolutionError(InputError):
    """solution.json is malformed."""


class ReferenceFailure(SolBenchError):
    """The problem's reference raised or produced unusable outputs."""

    status = Status.INVALID_REFERENCE


class CandidateFailure(SolBenchError):
    """The candidate lost a workload; ``status`` is the verdict; ``stats`` holds error statistics if any.

    A subclass names its verdict in its bases: ``class WrongShape(CandidateFailure, status=...)``.
    """

    status: Status = Status.RUNTIME_ERROR

    def __init_subclass__(cls, status: Status | None = None, **kwargs: object):
        super().__init_subclass__(**kwargs)
        if status is not None:
            cls.status = status

    def __init__(self, message: str, stats: object | None = None):
        super().__init__(message)
        self.stats = stats


class CompileFailure(CandidateFailure, status=Status.COMPILE_ERROR):
    """The candidate did not build."""


class CandidateTimeout(CandidateFailure, status=Status.TIMEOUT):
    """Its build or a call ran out of time."""


class CandidateCrash(CandidateFailure, status=Status.RUNTIME_ERROR):
    """The candidate's process died."""


class WrongShape(CandidateFailure, status=Status.INCORRECT_SHAPE):
    """An output's shape is not the reference's."""


class WrongDtype(CandidateFailure, status=Status.INCORRECT_DTYPE):
    """An output's dtype is not the reference's."""


class WrongNumbers(CandidateFailure, status=Status.INCORRECT_NUMERICAL):
    """An output's values are outside the workload's tolerance."""


class RewardHack(CandidateFailure, status=Status.REWARD_HACK):
    """The candidate games the measurement: it changes its inputs, hides work, or computes differently when timed."""


class JudgeError(SolBenchError):
    """The judge itself is broken (environment, bug). Never a pass."""
