"""The names of a run directory's files and folders, and run.json's statuses: the one place that owns them.

RunDir (grpokit.run.rundir) builds every path from these; a run's record reserves `own_entries()` (a run record
naming anything else is refused, grpokit.run.record) and grpokit.run.ownership clears nothing else.
"""
from __future__ import annotations

CONFIG_FILE, RUN_FILE, LOCK_FILE = "config.yaml", "run.json", ".lock"
METRICS_FILE, SAMPLES_FILE, HEALTH_FILE = "metrics.jsonl", "samples.jsonl", "health.jsonl"
CHECKPOINTS_DIR = "checkpoints"
MODEL_CARD = "README.md"  # TRL's model card: create_model_card writes it into checkpoints/ at every save
EVAL_DIR, RESULTS_FILE, BEST_FILE = "eval", "results.json", "best.json"
TOOL_RESULTS_FILE = "results-tools.json"  # tool tasks (recipe env:): grpokit.evaluation.tools writes, report reads
REPORT_DIR, EXPORT_DIR, DEMO_FILE, PREFLIGHT_FILE = "report", "export", "demo.json", "preflight.json"
REFERENCE_DIR, SET_ASIDE_DIR = "reference", "set-aside"
# run.json "status": running while a process trains; the rest say how it ended (details in "reason"/"error").
STATUSES = ("running", "completed", "interrupted", "stopped", "aborted", "failed")


def own_entries() -> dict[str, str]:
    """The entries grpokit writes at the top of a run directory (name -> "file" | "dir"): a run's record reserves
    them when the run is created, and --overwrite removes these and nothing else."""
    logs = (METRICS_FILE, SAMPLES_FILE, HEALTH_FILE)
    files = {CONFIG_FILE, RUN_FILE, DEMO_FILE, PREFLIGHT_FILE, *logs,
             *(log.replace(".jsonl", ".rolled_back.jsonl") for log in logs)}
    folders = {CHECKPOINTS_DIR, EVAL_DIR, REPORT_DIR, EXPORT_DIR, REFERENCE_DIR, f"{REFERENCE_DIR}.tmp",
               SET_ASIDE_DIR, "tensorboard"}  # tensorboard/: grpokit.training.tracking's event files
    return {**dict.fromkeys(files, "file"), **dict.fromkeys(folders, "dir")}
