"""The report: one HTML page with plots of a run (curves, evaluation, samples, health, lineage).

    write_report("runs/smollm2-arithmetic")     # -> runs/.../report/report.html

html (the page), plots (matplotlib figures), tools (the tool-task section).
"""
from grpokit.report.html import write_report

__all__ = ["write_report"]
