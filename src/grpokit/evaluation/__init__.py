"""Evaluation: every checkpoint of a run on held-out data, with the training verifiers.

    results = evaluate_run("runs/smollm2-arithmetic", checkpoints="all")
    compare_runs("runs/grpo", "runs/sft")

evaluate (one model's answers, scored), runs (a run's checkpoints, a model with no run), intervals (the 95% Wilson interval beside every printed accuracy), results (the results files and best.json), metrics (pass@k, gaps, the best checkpoint, the table), tools (tool
tasks), compare (two runs), mining (failures back into the data), rft (a model's right solutions, for rejection-sampling
fine-tuning), paired (two models on the same rows: the difference, its noise, the exact sign test).
"""
from grpokit.evaluation.compare import compare_runs, compare_table
from grpokit.evaluation.evaluate import evaluate, sample, score
from grpokit.evaluation.runs import EvalSets, eval_sets, evaluate_model, evaluate_run
from grpokit.evaluation.intervals import pct_interval, share_interval, wilson_interval
from grpokit.evaluation.metrics import pct, results_legend, results_table, rows_of
from grpokit.evaluation.mining import mine_failures
from grpokit.evaluation.rft import mine_solutions
from grpokit.evaluation.results import write_results
from grpokit.evaluation.tools import cli_eval, evaluate_tools

__all__ = ["EvalSets", "cli_eval", "eval_sets", "compare_runs", "compare_table", "evaluate", "evaluate_model", "evaluate_run",
           "evaluate_tools", "mine_failures", "mine_solutions", "pct", "pct_interval", "results_legend", "results_table", "rows_of", "sample", "score",
           "share_interval", "wilson_interval", "write_results"]
