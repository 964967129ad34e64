"""A model against the base model on the same held-out rows, judged by the task's learned reward: the win rate.

    win_rate([0.9, 0.4, 0.7], [0.5, 0.4, 0.8])   # {"rows": 3, "wins": 1, "ties": 1, "losses": 1, "win_rate": 0.5}
    against_base(entries)                        # each checkpoint's `vs_base`, from step 0's scores

A preference task (a `reward_model` reward: grpokit.rewards.learned) has no
answer to check, so its mean learned score says how much the reward model
likes the answers, not whether they got better than the base model's: a
model can raise the mean on a few rows and lose on most. The win rate
compares the two greedy answers to each held-out question, one pair per row,
by the reward model's score (ties counted half:
a tie is the same answer, which prefers neither).

The scores come from evaluation (EvalResult.preference_scores: every
preference-role reward's score per row); `grpokit eval RUN_DIR` and the
preference demo read them. What the learned score cannot show is whether the
reward model was gamed: pair it with a rule reward of the same preference
(direct_answer) and compare.
"""
from __future__ import annotations

# Two scores this close are one answer scored twice (a reward model in float32 scores the same text in batches of
# different widths a few ulps apart), not a preference.
TIE_TOLERANCE = 1e-6


def win_rate(scores: list[float | None], base_scores: list[float | None]) -> dict | None:
    """Pairwise wins, ties and losses of `scores` against `base_scores` (aligned by row; rows either side scored
    None are left out) and the win rate, (wins + ties / 2) / rows; None when no row has both scores."""
    if len(scores) != len(base_scores):
        raise ValueError(f"win_rate compares the same rows: {len(scores)} scores against {len(base_scores)}")
    pairs = [(a, b) for a, b in zip(scores, base_scores) if a is not None and b is not None]
    if not pairs:
        return None
    ties = sum(abs(a - b) <= TIE_TOLERANCE for a, b in pairs)
    wins = sum(a - b > TIE_TOLERANCE for a, b in pairs)
    return {"rows": len(pairs), "wins": wins, "ties": ties, "losses": len(pairs) - wins - ties,
            "win_rate": (wins + ties / 2) / len(pairs)}


def against_base(entries: list[dict]) -> list[dict]:
    """Every evaluated checkpoint after step 0 with `vs_base` ({reward: win_rate}) against step 0 on the same rows,
    when step 0 is among `entries` and the task has a learned reward; the entries otherwise unchanged."""
    base = next((e for e in entries if e["step"] == 0), None)
    base_scores = ((base or {}).get("heldout") or {}).get("preference_scores") or {}
    out = []
    for e in entries:
        mine = (e.get("heldout") or {}).get("preference_scores") or {}
        vs = {name: win_rate(mine[name], base_scores[name]) for name in mine
              if name in base_scores and len(mine[name]) == len(base_scores[name])} if e["step"] != 0 else {}
        out.append({**e, "vs_base": vs} if any(vs.values()) else e)
    return out


def win_names(entries: list[dict]) -> list[str]:
    """The learned rewards some checkpoint of `entries` has a win rate against the base by (tables, plots)."""
    return list(dict.fromkeys(n for e in entries for n, w in (e.get("vs_base") or {}).items() if w))
