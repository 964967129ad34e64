"""Training health: detectors over the run's logs, live during training and after it (`grpokit doctor`).

    findings = doctor_run("runs/smollm2-arithmetic")

monitor (the live monitor, doctor), detectors (one function per health code), findings (what a detector
returns and reads), tool_failures (the tool-task detector). Thresholds: grpokit.recipe.health_section.
"""
from grpokit.health.detectors import DETECTORS
from grpokit.health.findings import Finding
from grpokit.health.monitor import HealthMonitor, actions_taken, diagnose, doctor_run

__all__ = ["DETECTORS", "Finding", "HealthMonitor", "actions_taken", "diagnose", "doctor_run"]
