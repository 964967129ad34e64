"""Training health: detectors over the run's logs, live during training and after it (`grpokit doctor`).

    findings = doctor_run("runs/smollm2-arithmetic")

monitor (the live monitor, doctor), detectors (one function per health code, the DETECTORS table), completions
(the detectors that read sampled completions), findings (what a detector returns and reads). Each code's severity,
default action and thresholds: its row of grpokit.recipe.health_section.HEALTH_CODES.
"""
from grpokit.health.detectors import DETECTORS
from grpokit.health.findings import Finding
from grpokit.health.learning import best_probed
from grpokit.health.monitor import HealthMonitor, actions_taken, diagnose, doctor_run, reward_weights

__all__ = ["DETECTORS", "Finding", "HealthMonitor", "actions_taken", "best_probed", "diagnose", "doctor_run",
           "reward_weights"]
