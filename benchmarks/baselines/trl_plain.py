"""A plain TRL GRPOTrainer script, written the way the GRPO articles write it: the baseline grpokit is measured against.

    python benchmarks/baselines/trl_plain.py --budget-min 8 --out /tmp/trl-plain   # train, then evaluate
    python benchmarks/baselines/trl_plain.py --max-steps 6 --no-eval

Uses NO grpokit code on purpose. Model: the embedded SmolLM2-135M-Instruct as
converted by grpokit into ~/.cache/grpokit/models/smollm2-135m-instruct (run
`grpokit demo` or any grpokit command that loads the default model once to
create it). Data: grpokit's bundled arithmetic task, read as plain JSONL.

The articles' choices: a chat prompt (user turn with the question and the
requested answer format, no system prompt), a correctness reward of 1.0 and a
format reward of 0.2, 8 generations per prompt, 24 new tokens, 2 prompts a
step, lr 3e-6, beta 0.04 (a reference model), loss_type "grpo" — otherwise TRL
1.16's defaults.

Training stops at --max-steps or after --budget-min minutes of training wall
time (model loading excluded), saving a checkpoint at every
--checkpoint-every-min minutes (and at the end). Afterwards (unless --no-eval)
the base model and every checkpoint are evaluated greedily on the held-out
eval.jsonl with this script's own check (`check` below), and a line per point
is printed; --results writes them as JSON for learning_efficiency.py.
"""
from __future__ import annotations

import argparse
import json
import re
import time
from pathlib import Path

import torch
from datasets import Dataset
from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
from trl import GRPOConfig, GRPOTrainer

ROOT = Path(__file__).resolve().parents[2]
MODEL = Path.home() / ".cache" / "grpokit" / "models" / "smollm2-135m-instruct"
TRAIN = ROOT / "src" / "grpokit" / "datasets" / "arithmetic" / "train.jsonl"
EVAL = ROOT / "src" / "grpokit" / "datasets" / "arithmetic" / "eval.jsonl"
INSTRUCTION = "Solve the problem. Show your work briefly, then end with 'Final answer: <number>'."
_ANSWER = re.compile(r"^\s*Final answer:\s*(-?\d+)\s*\.?\s*$", re.MULTILINE | re.IGNORECASE)


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def messages(question: str) -> list[dict]:
    return [{"role": "user", "content": f"{question}\n{INSTRUCTION}"}]


def check(completion: str, gold: str) -> tuple[bool, bool]:
    """(correct, well formatted): a 'Final answer: N' line; the last such N equals the gold integer."""
    found = _ANSWER.findall(completion)
    return bool(found) and int(found[-1]) == int(gold), bool(found)


def correctness_reward(completions, answer, **kwargs):
    return [1.0 if check(c[0]["content"], a)[0] else 0.0 for c, a in zip(completions, answer)]


def format_reward(completions, **kwargs):
    return [0.2 if check(c[0]["content"], "0")[1] else 0.0 for c in completions]


class TimeBudget(TrainerCallback):
    """Save every `every_s` seconds of training, stop after `budget_s`; remembers when each save happened."""

    def __init__(self, budget_s: float, every_s: float):
        self.budget_s, self.every_s = budget_s, every_s
        self.t0 = None
        self.next_mark = every_s
        self.saved: dict[int, float] = {}  # step -> training seconds at that step

    def on_train_begin(self, args, state, control, **kw):
        self.t0 = time.perf_counter()

    def on_step_end(self, args, state, control, **kw):
        elapsed = time.perf_counter() - self.t0
        if elapsed >= self.next_mark or elapsed >= self.budget_s or state.global_step >= state.max_steps:
            control.should_save = True
            self.saved[state.global_step] = elapsed
            while self.next_mark <= elapsed:
                self.next_mark += self.every_s
        if elapsed >= self.budget_s:
            control.should_training_stop = True


@torch.no_grad()
def evaluate(model, tokenizer, prompts: list[str], golds: list[str], max_new_tokens: int, batch: int = 16) -> dict:
    """Greedy held-out accuracy and format rate; `prompts` are rendered texts (chat template applied)."""
    tokenizer.padding_side = "left"
    model.eval()
    correct = formatted = 0
    for i in range(0, len(prompts), batch):
        enc = tokenizer(prompts[i:i + batch], return_tensors="pt", padding=True, add_special_tokens=False)
        out = model.generate(**enc, max_new_tokens=max_new_tokens, do_sample=False,
                             pad_token_id=tokenizer.pad_token_id)
        for text, gold in zip(tokenizer.batch_decode(out[:, enc["input_ids"].shape[1]:], skip_special_tokens=True),
                              golds[i:i + batch]):
            c, f = check(text, gold)
            correct += c
            formatted += f
    return {"accuracy": correct / len(prompts), "format_rate": formatted / len(prompts)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="/tmp/trl-plain")
    ap.add_argument("--max-steps", type=int, default=10_000)
    ap.add_argument("--budget-min", type=float, default=8.0, help="training wall-clock budget (minutes)")
    ap.add_argument("--checkpoint-every-min", type=float, default=2.0)
    ap.add_argument("--eval-rows", type=int, default=64)
    ap.add_argument("--eval-file", default=str(EVAL), help="held-out JSONL rows {question, answer} (default: eval.jsonl)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-completion-length", type=int, default=24,
                    help="new tokens per completion (24: the articles'; also used for its evaluation)")
    ap.add_argument("--no-eval", action="store_true")
    ap.add_argument("--results", help="write the eval points as JSON here")
    args = ap.parse_args()

    tokenizer = AutoTokenizer.from_pretrained(MODEL)
    model = AutoModelForCausalLM.from_pretrained(MODEL, dtype=torch.float32)
    train = Dataset.from_list([{"prompt": messages(r["question"]), "answer": r["answer"]} for r in read_jsonl(TRAIN)])
    config = GRPOConfig(
        output_dir=args.out, learning_rate=3e-6, beta=0.04, loss_type="grpo", num_generations=8,
        max_completion_length=args.max_completion_length, per_device_train_batch_size=16, gradient_accumulation_steps=1,
        max_steps=args.max_steps, logging_steps=1, save_strategy="steps", save_steps=10**9, report_to=[],
        seed=args.seed,
        bf16=False, use_cpu=True,  # what it takes to run on a CPU-only machine at all; nothing else tuned
    )
    budget = TimeBudget(args.budget_min * 60, args.checkpoint_every_min * 60)
    trainer = GRPOTrainer(model=model, reward_funcs=[correctness_reward, format_reward], args=config,
                          train_dataset=train, processing_class=tokenizer, callbacks=[budget])
    trainer.train()
    print(f"trained {trainer.state.global_step} steps in {time.perf_counter() - budget.t0:.0f}s; "
          f"checkpoints at (step: s) {budget.saved}")
    if args.no_eval:
        return

    rows = read_jsonl(Path(args.eval_file))[: args.eval_rows]
    prompts = [tokenizer.apply_chat_template(messages(r["question"]), tokenize=False, add_generation_prompt=True)
               for r in rows]
    golds = [r["answer"] for r in rows]
    points = [{"step": 0, "seconds": 0.0, **evaluate(AutoModelForCausalLM.from_pretrained(MODEL, dtype=torch.float32),
                                                      tokenizer, prompts, golds, args.max_completion_length)}]
    for step, secs in sorted(budget.saved.items()):
        ckpt = Path(args.out) / f"checkpoint-{step}"
        points.append({"step": step, "seconds": round(secs, 1),
                       **evaluate(AutoModelForCausalLM.from_pretrained(ckpt, dtype=torch.float32), tokenizer,
                                  prompts, golds, args.max_completion_length)})
    for p in points:
        print(f"step {p['step']:>4}  t={p['seconds']:>6.0f}s  accuracy {p['accuracy']:6.1%}  "
              f"format {p['format_rate']:6.1%}")
    if args.results:
        Path(args.results).write_text(json.dumps(points, indent=1))


if __name__ == "__main__":
    main()
