"""Take a campaign's winners out of solforge: solution directories and an importable custom-op package."""

from .exporter import ExportResult, export_winners
from .package import ExportError

__all__ = ["ExportError", "ExportResult", "export_winners"]
