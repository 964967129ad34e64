"""Training health: pathology detectors over metrics.jsonl / samples.jsonl, live and after the fact.

    grpokit doctor runs/smollm2-arithmetic          # a table of findings
    grpokit doctor runs/smollm2-arithmetic --json   # [{code, severity, step, message, evidence}], [] when healthy

Each detector is a pure function of the metrics logged so far (TRL's key
names: reward, rewards/<name>/mean, kl, entropy, completions/mean_length,
completions/clipped_ratio, frac_reward_zero_std, loss, grad_norm) and the
completions sampled at the latest step; it judges the *latest* step and
returns a `Finding` or None. The live monitor (`HealthMonitor`, wired into
training by grpokit.training) calls them after every logging step; `doctor`
replays a finished run step by step through the same functions, so both
report the same thing. A finding is reported when its condition starts and
again only after it has cleared.

Thresholds are the recipe's `health` section (grpokit.recipe.HealthConfig:
the one place they are documented, with defaults). Each message carries the
fix the two source articles give. The actions (warn | stop | rollback) are
applied by the monitor; rollback itself is carried out by grpokit.training.

Not covered: judging answers (that is evaluation), metrics TRL does not log
(kl exists only when beta > 0), runs with no metrics.jsonl.
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from grpokit.errors import GrpokitError, Problem
from grpokit.health.detectors import DETECTORS
from grpokit.health.findings import Context, Finding, is_finite, reward_names_in, rounded
from grpokit.health.learning import probe_fall, smallest_confirmed_fall
from grpokit.recipe import HEALTH_CODES, HealthConfig, RewardConfig
from grpokit.rewards import reward_label
from grpokit.run import PROBE_ACCURACY, PROBE_ROWS, RunDir, read_json
from grpokit.run.writer import append_file
from grpokit.task import reward_roles


def check_step(metrics: list[dict], samples: list[dict], cfg: HealthConfig, ctx: Context) -> list[Finding]:
    """Every detector on the latest step: `metrics` so far, `samples` of that step."""
    if not metrics:
        return []
    ctx.see(samples)
    return [f for f in (d(metrics, samples, cfg, ctx) for d in DETECTORS.values()) if f is not None]


class Tracker:
    """Reports a code when its condition starts and again only after it cleared (live and offline alike)."""

    def __init__(self):
        self.active: set[str] = set()

    def new(self, findings: list[Finding]) -> list[Finding]:
        codes = {f.code for f in findings}
        fresh = [f for f in findings if f.code not in self.active]
        self.active = codes
        return fresh


def diagnose(metrics: list[dict], samples: list[dict], cfg: HealthConfig | None = None,
             evals: list[dict] | None = None, reward_names: list[str] | dict[str, str] | None = None,
             weights: dict[str, float] | None = None) -> list[Finding]:
    """Replay a run step by step through the detectors; every finding, in step order. `reward_names`: the names, or
    {name: role}; `weights`: {name: the recipe's weight} (weight-0 rewards are logged, not trained on)."""
    cfg = cfg or HealthConfig()
    ctx = Context(list(reward_names or reward_names_in(metrics)), list(evals or []),
                  roles=dict(reward_names) if isinstance(reward_names, dict) else {}, weights=dict(weights or {}))
    by_step: dict[int, list[dict]] = {}
    for x in samples:
        by_step.setdefault(x.get("step"), []).append(x)
    metrics = sorted((r for r in metrics if isinstance(r.get("step"), int)), key=lambda r: r["step"])
    tracker, out = Tracker(), []
    for i in range(len(metrics)):
        out += tracker.new(check_step(metrics[: i + 1], by_step.get(metrics[i]["step"], []), cfg, ctx))
    return out


# ---------------------------------------------------------------- run directory (grpokit.run reads it)
def load_evals(run_dir: Path) -> list[dict]:
    """[{step, accuracy}] (held-out greedy accuracy) from eval/results.json (grpokit eval) when present."""
    data = read_json(RunDir(run_dir).results_path())
    if data is None:
        return []
    found: list[dict] = []

    def walk(node, depth=0):
        if depth > 4:
            return
        if isinstance(node, dict):
            # grpokit eval writes {"checkpoints": [{"step", "heldout": {"accuracy"}, ...}], "best": ...}
            acc = node.get("accuracy")
            if not is_finite(acc) and isinstance(node.get("heldout"), dict):
                acc = node["heldout"].get("accuracy")
            if isinstance(node.get("step"), int) and is_finite(acc):
                if all(f["step"] != node["step"] for f in found):
                    found.append({"step": node["step"], "accuracy": float(acc)})
                return
            for v in node.values():
                walk(v, depth + 1)
        elif isinstance(node, list):
            for v in node:
                walk(v, depth + 1)

    walk(data)
    return found


def doctor_run(run_dir: Path) -> list[Finding]:
    """Diagnose a run directory with the thresholds of its own recipe (defaults if it has none)."""
    run = RunDir(run_dir)
    if not run.metrics.is_file():
        raise GrpokitError([Problem(str(run_dir), f"no {run.metrics.name} here",
                                    "pass the output_dir of a `grpokit train` run")])
    cfg, names, weights = HealthConfig(), None, None
    raw = run.raw_config()
    if raw is not None:
        cfg = HealthConfig.model_validate(raw.get("health") or {})
        try:  # names, roles and weights as the run trained with them
            configs = [RewardConfig.model_validate(r) for r in raw.get("rewards") or []]
            names, weights = reward_roles(configs) or None, reward_weights(configs)
        except ValueError:
            names = None
    return diagnose(run.read_metrics(), run.read_samples(), cfg, load_evals(run_dir), names, weights)


def reward_weights(reward_configs) -> dict[str, float]:
    """{logged name: weight} of a recipe's reward entries (a weight-0 reward is logged, not trained on)."""
    return {reward_label(rc): rc.weight for rc in reward_configs}


# ---------------------------------------------------------------- live monitor
@dataclass
class Decision:
    action: str  # stop | rollback
    finding: Finding


class HealthMonitor:
    """Live: run the detectors after each logging step, write health.jsonl, print, decide warn/stop/rollback.

    `rollbacks_left` is what the run may still spend; a rollback finding past it stops the run instead.
    `plan_rollback(finding) -> str` (given by train) describes the rollback for the log line.
    """

    def __init__(self, cfg: HealthConfig, run_dir: Path, reward_names: list[str], rollbacks_left: int,
                 plan_rollback: Callable[[Finding], str] | None = None, printer: Callable[[str], None] = print,
                 weights: dict[str, float] | None = None, probe: Callable[[], dict] | None = None):
        self.cfg, self.run_dir = cfg, Path(run_dir)
        self.ctx = Context(list(reward_names), load_evals(run_dir),
                           roles=dict(reward_names) if isinstance(reward_names, dict) else {}, weights=dict(weights or {}))
        self.metrics = RunDir(run_dir).read_metrics()  # history before a resume / rollback
        self.rollbacks_left = rollbacks_left
        self.plan_rollback = plan_rollback
        self.printer = printer
        self.tracker = Tracker()
        self.decision: Decision | None = None
        self.probe = probe  # measures the held-out probe on the weights as they are now (grpokit.training.probe)
        self.held: dict[str, Finding] = {}  # findings whose action the probe held back, asked again at checkpoints

    def observe(self, record: dict, samples: list[dict]) -> Decision | None:
        self.metrics = [r for r in self.metrics if r.get("step", 0) < record["step"]] + [record]
        for f in self.tracker.new(check_step(self.metrics, samples, self.cfg, self.ctx)):
            self.act(f, self.unconfirmed)
        # An unconfirmed finding is asked again at each checkpoint's probe (the reading in this step's metrics line,
        # no extra probe) while its condition stays; a confirmation then takes the action it held back.
        self.held = {code: f for code, f in self.held.items() if code in self.tracker.active}
        if PROBE_ACCURACY in record and self.decision is None:
            for code, held in list(self.held.items()):
                if held.step >= record["step"]:  # held at this very step, on a probe of these weights
                    continue
                del self.held[code]
                first = held.evidence.get("probe", {}).get("asked_again_since", held.step)
                again = dataclasses.replace(held, step=record["step"], evidence=dict(held.evidence))
                self.act(again, lambda f, first=first: self.unconfirmed(f, record, asked_again=first))
        return self.decision

    def act(self, f: Finding, unconfirmed: Callable[[Finding], str | None]) -> None:
        """Record `f` with its action: the recipe's, held back to a warning when the probe does not confirm it."""
        action = getattr(self.cfg.actions, f.code)
        detail = action
        if action in ("stop", "rollback") and self.decision is None and (held := unconfirmed(f)):
            action, detail = "warn", held
            self.held[f.code] = f
        if action == "rollback" and self.decision is None:
            if self.rollbacks_left <= 0:
                action, detail = "stop", f"stop (rollback asked, but health.max_rollbacks={self.cfg.max_rollbacks} spent)"
            elif self.plan_rollback is not None:
                detail = self.plan_rollback(f)
        elif action != "warn" and self.decision is not None:
            detail = f"{action} (already {self.decision.action}ing for {self.decision.finding.code})"
        if action in ("stop", "rollback") and self.decision is None:
            self.decision = Decision(action, f)
        self.record(f, detail)

    def unconfirmed(self, f: Finding, figures: dict | None = None, asked_again: int | None = None) -> str | None:
        """Why a stop or rollback on `f` does not happen: a finding read on the drawn training prompts
        (HEALTH_CODES' probe_confirms) that the held-out probe, measured now, does not confirm (it has not fallen
        from its best beyond probe_drop's noise). None: the action goes ahead (confirmed, or no probe to ask).
        `figures`: a checkpoint's probe reading to judge by (a finding asked again), else the probe is measured now.
        The reading goes into the finding's evidence, not into metrics.jsonl: it measured weights no checkpoint holds."""
        if self.probe is None or not HEALTH_CODES[f.code].probe_confirms:
            return None
        if figures is None:
            figures = self.probe()
        now, rows = figures.get(PROBE_ACCURACY), int(figures.get(PROBE_ROWS) or 0)
        earlier = [m for m in self.metrics if m.get("step", 0) < f.step]
        fall = probe_fall(earlier, now, rows, self.cfg) if now is not None else None
        if fall is None:  # nothing to compare with: the finding decides alone
            return None
        smallest = smallest_confirmed_fall(fall.best, rows, self.cfg)
        f.evidence["probe"] = {"now": rounded(now), "best": rounded(fall.best), "best_step": fall.best_step,
                               "rows": rows, "noise": rounded(fall.noise), "confirmed": fall.beyond_noise,
                               "smallest_confirmed_fall": None if smallest is None else rounded(smallest),
                               **({"asked_again_since": asked_again} if asked_again is not None else {})}
        if fall.beyond_noise:
            return None
        return (f"warn (not confirmed by the held-out probe: {rounded(100 * now, 1)}% of its {rows} rows now, "
                f"{rounded(100 * fall.best, 1)}% at step {fall.best_step}; {blind_spot(fall.best, rows, self.cfg)}, "
                "so a smaller fall of the model, or none, reads the same; asked again at the next checkpoint's probe "
                "while the finding stays" + (f", first held at step {asked_again})" if asked_again is not None else ")"))

    def record(self, f: Finding, action: str) -> None:
        line = {**f.as_dict(), "action": action}
        with append_file(RunDir(self.run_dir).health) as fh:  # never through a link
            fh.write(json.dumps(line, ensure_ascii=False) + "\n")
        # No [brackets] round the code: the live printer is a rich console, whose markup took "[kl_spike]" for a
        # style tag and printed "health warning  step 2" without the code.
        self.printer(f"health {f.severity} {f.code} at step {f.step}: {f.message} -> action: {action}")


def blind_spot(best: float, rows: int, cfg: HealthConfig) -> str:
    """What the probe cannot see from `best` on `rows` rows, in words: "cannot confirm a fall under X points on N
    rows" (probe_drop's rule, grpokit.health.learning.smallest_confirmed_fall)."""
    smallest = smallest_confirmed_fall(best, rows, cfg)
    if smallest is None:
        return f"from {rounded(100 * best, 1)}% the probe cannot confirm any fall on {rows} rows"
    return (f"from {rounded(100 * best, 1)}% the probe cannot confirm a fall under {rounded(100 * smallest, 1)} "
            f"points on {rows} rows" + (" (only a fall to 0%)" if smallest >= best - 1e-9 else ""))


def actions_taken(run_dir: Path) -> list[dict]:
    """What the live monitor did beyond warning (its rolled-back steps are no longer in metrics.jsonl)."""
    return [h for h in RunDir(run_dir).read_health() if h.get("action") != "warn"]
