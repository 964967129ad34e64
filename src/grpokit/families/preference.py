"""The preference family: replies judged by a learned reward model (`reward_model`, grpokit.rm) trained on people's
rankings, where there is no standard answer (tone, style).

    grpokit demo --task preference      # a reward model from the bundled rankings, then GRPO against it

Its rows are prompts (`answer`: the best-ranked reply, for SFT); there is no gold answer to check them against, so
the family has no row check, and the audit does not try tricks on it: a learned reward is gameable by nature
(grpokit.audit warns instead), and evaluation reports each checkpoint's win rate against the base model
(grpokit.evaluation.preference).
"""
from __future__ import annotations

from grpokit.families.base import Demo, Family

FAMILY = Family(
    "preference", "a reply judged by a reward model trained on people's rankings (reward_model)",
    demos={"preference": Demo("preference", "runs/demo-preference", "a reward model from the bundled rankings, then "
                              "GRPO against it (recipes/smollm2-preference.yaml)")},
)
