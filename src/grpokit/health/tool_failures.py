"""Health detector for tool tasks: the share of failing tool calls is rising.

TRL logs `tools/failure_frequency` (calls that raised in the environment, or
named no tool, over all calls) each step. A policy that drifts into malformed
calls, undefined tools or a spent step budget shows it here before the task
reward moves. Fires when the recent mean (last `window` steps) is at least
`tool_failure_max` and has risen by `tool_failure_rise` over the first
`window` steps after warm-up. Registered in grpokit.health.detectors.DETECTORS under
`tool_failures_rising`; runs without tool calls log 0 and never fire.
"""
from __future__ import annotations

from statistics import mean

from grpokit.health.findings import Finding, metric_series, rounded, values_of


def detect_tool_failures(m, s, cfg, ctx):
    w = cfg.window
    f = [p for p in metric_series(m, "tools/failure_frequency") if p[0] > cfg.warmup_steps]
    if len(f) < 2 * w or f[-1][0] != m[-1]["step"]:
        return None
    early, now = mean(values_of(f[:w])), mean(values_of(f[-w:]))
    if now < cfg.tool_failure_max or now - early < cfg.tool_failure_rise:
        return None
    return Finding("tool_failures_rising", "warning", f[-1][0],
                   f"{100 * now:.0f}% of tool calls fail (was {100 * early:.0f}%): the model calls undefined tools, "
                   "passes bad arguments or spends its step budget. Fix: read samples.jsonl for the failing calls; "
                   "weight tool_args (well-formed arguments) higher, keep the tool definitions in every row, and "
                   "resume from a checkpoint before the rise",
                   {"recent_failure_frequency": rounded(now), "early_failure_frequency": rounded(early),
                    "max": cfg.tool_failure_max, "rise": cfg.tool_failure_rise}, since=f[-w][0])
