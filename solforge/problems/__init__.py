"""Problems cut from real model architectures: a catalog of published configurations, op builders, the
extractor that writes SOL-ExecBench problem directories, and the checks the bundled set passes."""

from .catalog import ARCHITECTURES, Architecture, get_architecture
from .draft import ProblemDraft, Source
from .extract import ExtractError, extract, merge, parse_override, write_problems

__all__ = [
    "ARCHITECTURES", "Architecture", "ExtractError", "ProblemDraft", "Source", "extract", "get_architecture",
    "merge", "parse_override", "write_problems",
]  # fmt: skip
