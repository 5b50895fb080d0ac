"""The HTML report of a campaign: figures (matplotlib, inline SVG), tables, and the winners' files."""

from .render import ReportError, build_report

__all__ = ["ReportError", "build_report"]
