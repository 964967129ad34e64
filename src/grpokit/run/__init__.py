"""The run directory: the one owner of a run's paths and files.

    run = RunDir("runs/smollm2-arithmetic")
    run.read_metrics(); run.complete_checkpoints(); run.resolve_checkpoint("best")

rundir (RunDir: paths, config/run files, checkpoints, eval results), files (crash-tolerant JSON/JSONL,
metric names), checkpoints (names, damage checks), locks (the writer lock, FolderLock), writer (the one writer), claims
(folders by their record), temporaries (the writer's temporary
files, a killed writer's swept), safety (disk space, recording a failure),
layout (the names of a run's files and folders), ownership (which folders a run may use, and what --overwrite may delete: grpokit's own files only), ending
(whether a run reached its end, and which step a partial one holds).
"""
from grpokit.run.ending import run_end
from grpokit.run.checkpoints import checkpoint_damage, nonfinite_weights, refuse_nonfinite, step_of, torch_state_damage
from grpokit.run.locks import RunLock
from grpokit.run.files import (MEMORY_KEYS, POSITIONS_COMPUTED, POSITIONS_RATIO, POSITIONS_TRL, PROBE_ACCURACY, PROBE_ROWS,
                               PROBE_SECONDS, SAMPLER_CLIPPED, SAMPLER_GAP_MAX, SAMPLER_GAP_MEAN, SAMPLER_KEYS, jsonable,
                               read_json, read_jsonl)
from grpokit.run.ownership import is_run_dir, writable_problem
from grpokit.run.layout import CONFIG_FILE, EVAL_DIR, REPORT_DIR, STATUSES, TOOL_RESULTS_FILE
from grpokit.run.rundir import RunDir, describe_lineage
from grpokit.run.steps import CHECKPOINT_SPECS, select_steps
from grpokit.run.safety import disk_problem, disk_space_guard, fail_run

__all__ = ["CHECKPOINT_SPECS", "CONFIG_FILE", "EVAL_DIR", "MEMORY_KEYS", "REPORT_DIR", "SAMPLER_CLIPPED",
           "POSITIONS_COMPUTED", "POSITIONS_RATIO", "POSITIONS_TRL", "PROBE_ACCURACY", "PROBE_ROWS", "PROBE_SECONDS",
           "SAMPLER_GAP_MAX", "SAMPLER_GAP_MEAN", "SAMPLER_KEYS", "STATUSES",
           "TOOL_RESULTS_FILE", "RunDir", "RunLock", "checkpoint_damage", "describe_lineage", "disk_problem", "disk_space_guard",
           "fail_run", "is_run_dir", "jsonable", "nonfinite_weights", "read_json", "read_jsonl", "refuse_nonfinite", "run_end", "select_steps", "torch_state_damage",
           "step_of", "writable_problem"]
