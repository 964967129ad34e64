"""`reward_model`: a learned reward, the score of a reward model trained from rankings (grpokit.rm), and the
scorer that reads that model (`RewardModelScorer`, `rm_input_ids`: the one rule for the text it reads, which
`grpokit rm train` trains on too).

    rewards:
      - {name: reward_model, weight: 1.0, params: {path: runs/rm-style}}
      - {name: length, weight: 0.5}          # rule rewards alongside keep it honest

For tasks without a checkable answer (tone, style: the articles'
preference tasks). The model is loaded on first use, on the training device,
scores completions in batches and caches each (question, completion) for the
run. `scale: sigmoid` (default) maps the model's unbounded score into (0, 1)
so it mixes with 0/1 rule rewards and the health thresholds keep their
meaning; `raw` passes the logit through.

A learned reward can be gamed: the policy finds what the reward model
over-rewards (length, flattery, a phrase) rather than what people preferred.
The reward audit says so before training, and the health monitor's
`reward_hacking_suspected` compares it with the recipe's rule rewards.
Not covered: a reward model served over HTTP, several reward models at once.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

from grpokit.errors import GrpokitError, Problem
from grpokit.rewards.registry import describe

SCALES = ("sigmoid", "raw")
RM_FILE = "rm.json"  # the reward model's record: base, data, split, accuracy; also marks a folder as an RM
DEFAULT_MAX_LENGTH = 512
SCORE_BATCH = 8


# ---------------------------------------------------------------- the reward model's input and scorer
def rm_input_ids(tokenizer, question, answer: str, max_length: int = DEFAULT_MAX_LENGTH) -> list[int]:
    """Token ids the reward model reads for (question, answer); the one rule for training and scoring."""
    messages = [dict(m) for m in question] if isinstance(question, list) else [{"role": "user", "content": question}]
    messages.append({"role": "assistant", "content": answer})
    if getattr(tokenizer, "chat_template", None):
        text = tokenizer.apply_chat_template(messages, tokenize=False)
    else:
        text = "\n\n".join(m["content"] for m in messages)
    ids = list(tokenizer(text, add_special_tokens=False)["input_ids"])
    if tokenizer.eos_token_id is not None and (not ids or ids[-1] != tokenizer.eos_token_id):
        ids.append(tokenizer.eos_token_id)
    return ids[-max_length:]


def training_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


class RewardModelScorer:
    """Scores (question, answer) with a trained reward model: batched, on the training device, cached by text.

    The cache lives as long as the scorer (one training run): GRPO samples the same answer for a prompt
    often once a policy sharpens, and each repeat would cost a forward pass.
    """

    def __init__(self, path: str | Path, batch_size: int = SCORE_BATCH, device: str | None = None):
        self.path = Path(path)
        self.batch_size = batch_size
        self.device = device
        self.cache: dict[tuple[str, str], float] = {}
        self.forward_rows = 0  # rows actually run through the model (cache misses)
        self.model = self.tokenizer = None
        self.max_length = DEFAULT_MAX_LENGTH

    def _load(self):
        import torch
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        info = read_rm_info(self.path)
        self.max_length = int(info.get("max_length", DEFAULT_MAX_LENGTH))
        self.tokenizer = AutoTokenizer.from_pretrained(self.path)
        self.device = self.device or training_device()
        self.model = AutoModelForSequenceClassification.from_pretrained(self.path, dtype=torch.float32).to(self.device)
        self.model.eval()

    def score(self, questions: list, answers: list[str]) -> list[float]:
        import torch

        keys = [(q if isinstance(q, str) else json.dumps(q, sort_keys=True), a) for q, a in zip(questions, answers)]
        todo = list(dict.fromkeys(k for k in keys if k not in self.cache))
        if todo:
            if self.model is None:
                self._load()
            ids = {k: rm_input_ids(self.tokenizer, json.loads(k[0]) if k[0].startswith("[") else k[0], k[1],
                                   self.max_length) for k in todo}
            todo.sort(key=lambda k: len(ids[k]))  # similar lengths together: less padding
            pad = self.model.config.pad_token_id if self.model.config.pad_token_id is not None else 0
            for s in range(0, len(todo), self.batch_size):
                batch = todo[s:s + self.batch_size]
                width = max(len(ids[k]) for k in batch)
                # Right padding, as TRL's preference collator trains with; the head reads the last non-pad token.
                input_ids = torch.tensor([ids[k] + [pad] * (width - len(ids[k])) for k in batch], device=self.device)
                mask = torch.tensor([[1] * len(ids[k]) + [0] * (width - len(ids[k])) for k in batch],
                                    device=self.device)
                with torch.no_grad():
                    logits = self.model(input_ids=input_ids, attention_mask=mask).logits[:, 0].float().tolist()
                self.cache.update(zip(batch, logits))
                self.forward_rows += len(batch)
        return [self.cache[k] for k in keys]


def read_rm_info(path: str | Path) -> dict:
    path = Path(path)
    if not (path / RM_FILE).is_file() or not (path / "config.json").is_file():
        raise GrpokitError([Problem(str(path), f"not a reward model folder (no {RM_FILE} and config.json)",
                                    "train one with `grpokit rm train RANKINGS --base MODEL --out DIR` and pass DIR")])
    return json.loads((path / RM_FILE).read_text())


# ---------------------------------------------------------------- the reward
def _sigmoid(x: float) -> float:
    # Two branches so a large score of either sign never overflows exp().
    return 1.0 / (1.0 + math.exp(-x)) if x >= 0 else math.exp(x) / (1.0 + math.exp(x))


@describe(
    description="The score of a reward model trained from human rankings (`grpokit rm train`) for the question and "
    "the completion; sigmoid-scaled into (0, 1) by default. Learned, so it can be gamed: pair it with rule rewards.",
    columns=("question",),
    params={
        "path": "the reward model folder from `grpokit rm train` (relative paths: from the current directory)",
        "batch_size": "completions scored per forward pass (default 8)",
        "scale": "sigmoid (default): score in (0, 1); raw: the model's logit",
    },
)
def get_reward_model_reward(path: str | None = None, batch_size: int = 8, scale: str = "sigmoid"):
    r"""The `reward_model` scorer: a reward model's score of (question, completion), from a folder `grpokit rm train`
    wrote; the folder is checked when the reward is built, before any policy loads.

    Example (`score(completions, question=questions)` once `path` names a trained reward model):

    >>> from grpokit.rewards.learned import get_reward_model_reward
    >>> get_reward_model_reward(path=None)
    Traceback (most recent call last):
    grpokit.errors.GrpokitError: 1 problem(s) found
      - rewards: reward_model: params.path is not set
        fix: train a reward model (`grpokit rm train RANKINGS --out DIR`) and set params: {path: DIR}
    """
    if not path:
        raise GrpokitError([Problem("rewards: reward_model", "params.path is not set",
                                    "train a reward model (`grpokit rm train RANKINGS --out DIR`) and set "
                                    "params: {path: DIR}")])
    if scale not in SCALES:
        raise GrpokitError([Problem("rewards: reward_model params.scale", f"unknown scale {scale!r}",
                                    f"use one of {', '.join(SCALES)}")])
    if not isinstance(batch_size, int) or batch_size < 1:
        raise GrpokitError([Problem("rewards: reward_model params.batch_size", f"must be a positive whole number, "
                                    f"got {batch_size!r}", "e.g. batch_size: 8")])
    read_rm_info(Path(path).expanduser())  # a wrong folder is reported now, not after the policy has loaded
    scorer = RewardModelScorer(Path(path).expanduser(), batch_size)

    def score(completions: list[str], question: list | None = None, **_columns) -> list[float]:
        if question is None:
            raise ValueError("reward_model needs the question column")
        raw = scorer.score(list(question), completions)
        return raw if scale == "raw" else [_sigmoid(x) for x in raw]

    def explain(completion: str, question=None, **_row) -> dict:
        (s,) = score([completion], question=[question])
        return {"reward": s, "reason": "learned score"}

    score.explain = explain
    score.scorer = scorer  # tests and callers can see the cache and the forward count
    return score
