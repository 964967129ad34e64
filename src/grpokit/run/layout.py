"""The names of a run directory's files and folders, and run.json's statuses: the one place that owns them.

RunDir (grpokit.run.rundir) builds every path from these; grpokit.run.ownership reserves them in a run's record
and clears nothing else. Both import this module and nothing of each other's.
"""
from __future__ import annotations

CONFIG_FILE, RUN_FILE, LOCK_FILE = "config.yaml", "run.json", ".lock"
METRICS_FILE, SAMPLES_FILE, HEALTH_FILE = "metrics.jsonl", "samples.jsonl", "health.jsonl"
CHECKPOINTS_DIR = "checkpoints"
EVAL_DIR, RESULTS_FILE, BEST_FILE = "eval", "results.json", "best.json"
TOOL_RESULTS_FILE = "results-tools.json"  # tool tasks (recipe env:): grpokit.evaluation.tools writes, report reads
REPORT_DIR, EXPORT_DIR, DEMO_FILE, PREFLIGHT_FILE = "report", "export", "demo.json", "preflight.json"
REFERENCE_DIR, SET_ASIDE_DIR = "reference", "set-aside"
# run.json "status": running while a process trains; the rest say how it ended (details in "reason"/"error").
STATUSES = ("running", "completed", "interrupted", "stopped", "aborted", "failed")
