"""Speed-of-light: hardware models and the roofline analysis of a problem's reference."""

from .analyze import SolAnalysisError, SolResult, analyze_problem, analyze_workload
from .hardware import HardwareModel, Precision, get_hardware

__all__ = [
    "HardwareModel",
    "Precision",
    "SolAnalysisError",
    "SolResult",
    "analyze_problem",
    "analyze_workload",
    "get_hardware",
]
