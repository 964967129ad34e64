"""A reward model from human rankings: candidates to rank, the ranking files, training and evaluation.

    write_candidates(recipe, "prompts.jsonl", n=4, out="rankings.jsonl")
    train_reward_model("rankings.jsonl", base="default", out="runs/rm-style")

rankings (the ranking files and CSV round trip), train (candidates, TRL's RewardTrainer, pairwise accuracy).
The scorer the `reward_model` reward uses lives beside that reward (grpokit.rewards.learned).
"""
from grpokit.rm.rankings import export_csv, import_csv, pairs
from grpokit.rm.train import evaluate_reward_model, fmt_accuracy, train_reward_model, write_candidates

__all__ = ["evaluate_reward_model", "export_csv", "fmt_accuracy", "import_csv", "pairs", "train_reward_model",
           "write_candidates"]
