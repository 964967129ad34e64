"""Evaluation: the pass@k estimator, the best-checkpoint choice, perturbed rows, and eval on a tiny run."""
from __future__ import annotations

import json
import math

import pytest
import yaml
from conftest import REPO, write_jsonl
from conftest import CHARS, make_recipe

from grpokit.cli import main
from grpokit.families.math import PHRASINGS, generate, is_generated, make_row, perturb_rows
from grpokit.errors import GrpokitError
from grpokit.evaluation.runs import read_best, resolve_checkpoint
from grpokit.evaluation.metrics import accuracy_gap, choose_best, k_values, pass_at_k, pct
from grpokit.rewards.math import check_math
from grpokit.run.steps import select_steps


# ---------------------------------------------------------------- pass@k
@pytest.mark.parametrize("n, c, k, expected", [
    (1, 0, 1, 0.0),            # one wrong sample
    (1, 1, 1, 1.0),            # one right sample
    (2, 1, 1, 0.5),            # pass@1 is the share correct
    (10, 3, 1, 0.3),
    (4, 1, 2, 0.5),            # 1 - C(3,2)/C(4,2) = 1 - 3/6
    (10, 3, 5, 1 - 21 / 252),  # 1 - C(7,5)/C(10,5)
    (8, 0, 8, 0.0),            # never right: pass@k is 0 for every k
    (8, 8, 1, 1.0),            # always right
    (5, 3, 3, 1.0),            # n - c < k: every draw of k contains a right one
    (200, 1, 100, 0.5),        # large n: the product form stays exact, no overflow
])
def test_pass_at_k_table(n, c, k, expected):
    assert pass_at_k(n, c, k) == pytest.approx(expected, abs=1e-12)


def test_pass_at_k_matches_the_binomial_form():
    for n in range(1, 12):
        for c in range(n + 1):
            for k in range(1, n + 1):
                exact = 1 - math.comb(n - c, k) / math.comb(n, k)
                assert pass_at_k(n, c, k) == pytest.approx(exact, abs=1e-12), (n, c, k)


@pytest.mark.parametrize("n, c, k", [(4, 5, 1), (4, -1, 1), (4, 2, 0), (4, 2, 5)])
def test_pass_at_k_rejects_impossible_counts(n, c, k):
    with pytest.raises(ValueError):
        pass_at_k(n, c, k)


@pytest.mark.parametrize("n, ks", [(1, [1]), (2, [1, 2]), (5, [1, 2, 4, 5]), (8, [1, 2, 4, 8]), (0, [])])
def test_k_values_never_exceed_the_samples(n, ks):
    assert k_values(n) == ks


# ---------------------------------------------------------------- best checkpoint
def _entry(step, acc):
    return {"step": step, "path": f"ck-{step}", "heldout": {"accuracy": acc, "rows": 10}}


@pytest.mark.parametrize("accs, best", [
    ({0: 0.1, 5: 0.4, 10: 0.3}, 5),           # the highest held-out accuracy, not the last
    ({0: 0.1, 5: 0.4, 10: 0.4}, 5),           # a tie goes to the earlier step
    ({10: 0.4, 5: 0.4, 0: 0.4}, 0),           # order of entries does not matter; the base can be best
    ({0: None, 5: 0.2}, 5),                   # an entry without accuracy (unparseable golds) is skipped
    ({0: None}, None),                        # nothing scored: no best
    ({}, None),
])
def test_best_checkpoint_choice(accs, best):
    chosen = choose_best([_entry(s, a) for s, a in accs.items()])
    assert (chosen["step"] if chosen else None) == best


@pytest.mark.parametrize("spec, available, best, steps", [
    ("all", [5, 10], None, [0, 5, 10]),       # the base model is step 0
    ("last", [5, 10], None, [10]),
    ("last", [], None, [0]),                  # no checkpoint yet: the base model
    ("best", [5, 10], 5, [5]),
    ("10,0", [5, 10], None, [0, 10]),
])
def test_select_steps(spec, available, best, steps):
    assert select_steps(spec, available, best) == steps


@pytest.mark.parametrize("spec, best, what, fix", [
    ("7", None, "no complete checkpoint at step(s) [7]", "complete checkpoints: [5, 10]"),
    ("best", None, "no best checkpoint recorded yet", "grpokit eval RUN_DIR"),
    ("x,y", None, "cannot read 'x,y'", "all|best|last|auto|N"),
])
def test_select_steps_errors_say_what_exists(spec, best, what, fix):
    with pytest.raises(GrpokitError) as e:
        select_steps(spec, [5, 10], best)
    problem = e.value.problems[0]
    assert what in problem.message and fix in problem.fix, str(problem)


@pytest.mark.parametrize("kind, held, other, rows, flagged", [
    ("train", 0.78, 0.95, 100, True),          # the Qwen3-4B/14B article's 95% train vs 78% eval
    ("train", 0.78, 0.83, 100, False),         # 5 points: below the 10-point threshold
    ("train", 0.50, 0.75, 8, False),           # 25 points on 8 rows is within noise
    ("perturbed", 0.90, 0.60, 64, True),       # right on the originals, wrong with new numbers: memorised
    ("perturbed", 0.60, 0.90, 64, False),      # better on the perturbed copy is no sign of memory
])
def test_gap_is_flagged_when_large_and_beyond_noise(kind, held, other, rows, flagged):
    g = accuracy_gap(kind, {"accuracy": held, "rows": rows}, {"accuracy": other, "rows": rows})
    assert g["flagged"] is flagged


# ---------------------------------------------------------------- perturbation
def test_perturbation_keeps_answers_correct():
    rows = generate(200, seed=3)
    out = perturb_rows([{**r, "id": i} for i, r in enumerate(rows)], seed=1)
    assert len(out) == len(rows)
    for orig, new in zip(rows, out):
        a, b = new["a"], new["b"]
        assert new["kind"] == orig["kind"] and (a, b) != (orig["a"], orig["b"])
        assert new["question"] == PHRASINGS[new["kind"]][0].format(a=a, b=b)
        assert int(new["answer"]) == (a + b if new["op"] == "+" else a - b) >= 0
        assert is_generated(new) and "id" in new  # still a generated row; other columns kept
        assert check_math(f"Final answer: {new['answer']}", new["answer"]).reward == 1.0  # the verifier agrees
    assert perturb_rows(rows, seed=1) == perturb_rows(rows, seed=1)  # seeded


def test_perturbation_avoids_training_questions():
    rows = generate(50, seed=3)
    first = perturb_rows(rows, seed=1)
    again = perturb_rows(rows, seed=1, exclude={r["question"] for r in first})  # as if they were all in train
    assert not {r["question"] for r in again} & {r["question"] for r in first}


@pytest.mark.parametrize("row", [
    {"question": "What is 2 + 2?", "answer": "4"},                                   # no kind/a/b
    {**make_row(0, 3, 4), "question": "What is 3 + 4 apples?"},                       # question edited
    {**make_row(0, 3, 4), "kind": 99},                                               # unknown kind
])
def test_non_generated_rows_are_not_perturbed(row):
    assert not is_generated(row)
    with pytest.raises(ValueError):
        perturb_rows([row])


def test_data_perturb_command(tmp_path, capsys):
    src = write_jsonl(tmp_path / "eval.jsonl", generate(10, seed=5))
    train = write_jsonl(tmp_path / "train.jsonl", generate(300, seed=6))
    assert main(["data", "perturb", str(src), str(tmp_path / "p.jsonl"), "--seed", "2", "--exclude", str(train)]) == 0
    out = [json.loads(l) for l in (tmp_path / "p.jsonl").read_text().splitlines()]
    assert len(out) == 10 and all(is_generated(r) for r in out)
    assert not {r["question"] for r in out} & {json.loads(l)["question"] for l in train.read_text().splitlines()}
    gsm = write_jsonl(tmp_path / "gsm.jsonl", [{"question": "Tom has 3 apples.", "answer": "3"}])
    assert main(["data", "perturb", str(gsm), str(tmp_path / "x.jsonl")]) == 2
    assert "not generated arithmetic rows" in capsys.readouterr().err


# ---------------------------------------------------------------- a tiny run
@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory, tiny_model_dir):
    tmp = tmp_path_factory.mktemp("evalrun")
    recipe = make_recipe(tmp, tiny_model_dir, [CHARS, {"name": "math_correctness", "weight": 0.5},
                                               {"name": "format", "weight": 0.5}])
    run = tmp / "run"
    assert main(["train", str(recipe), "--output-dir", str(run), "--skip-audit"]) == 0
    return run


def test_eval_every_checkpoint_of_a_tiny_run(tiny_run, capsys):
    assert main(["eval", str(tiny_run), "--samples", "2", "--max-rows", "3", "--max-new-tokens", "6"]) == 0
    res = json.loads((tiny_run / "eval" / "results.json").read_text())
    assert [e["step"] for e in res["checkpoints"]] == [0, 1, 2]
    e = res["checkpoints"][1]
    h = e["heldout"]
    assert h["rows"] == 3 and 0 <= h["accuracy"] <= 1 and set(h["pass_at_k"]) == {"1", "2"}
    assert len(h["sample_hits"]) == 3 and all(0 <= n <= 2 for n in h["sample_hits"])  # pass@k's input, per row
    recipe = yaml.safe_load((tiny_run / "config.yaml").read_text())["train"]
    assert res["sampling"] == {"temperature": recipe["temperature"], "top_p": recipe["top_p"]}  # what pass@k drew at
    assert h["refusal_rate"] is not None and h["mean_length"] <= 6
    assert e["perturbed"]["rows"] == 3 and e["train"] is None and e["gap"]["kind"] == "perturbed"
    assert e["rewritten"]["rows"] == 3 and res["variants"]["rewritten"]["rows"] == 3  # new words, same problems
    best = read_best(tiny_run)
    assert best == res["best"] and best["step"] == choose_best(res["checkpoints"])["step"]
    out = capsys.readouterr().out
    assert "held-out" in out and "perturbed" in out and "pass@2" in out and "best" in out
    assert h["precision"] == "float32" and "(float32, " in out  # what the completions were generated in
    assert "gap: percentage points the model does better where it may have memorised: held-out minus perturbed" in \
        " ".join(out.split())  # the legend under the table
    assert f"samples at temperature {recipe['temperature']}, top-p {recipe['top_p']}" in " ".join(out.split())
    # Off a terminal (captured here) the table keeps every header and value whole, each accuracy with its interval.
    assert "…" not in out and "sampled pass@2" in out and "95% Wilson interval" in " ".join(out.split())
    assert pct(h["accuracy"], 3) in out and f"best: step {best['step']} ({pct(best['accuracy'], 3)} held-out" in out

    # A second evaluation of one step keeps the others (same data, same settings).
    assert main(["eval", str(tiny_run), "--checkpoints", "last", "--samples", "2", "--max-rows", "3",
                 "--max-new-tokens", "6"]) == 0
    res2 = json.loads((tiny_run / "eval" / "results.json").read_text())
    assert [e["step"] for e in res2["checkpoints"]] == [0, 1, 2]
    ck = resolve_checkpoint(tiny_run, "best")
    assert (ck is None) == (best["step"] == 0) and (ck is None or ck.name == f"checkpoint-{best['step']}")

    # The report reads what eval wrote.
    assert main(["report", str(tiny_run)]) == 0
    page = (tiny_run / "report" / "report.html").read_text()
    assert f"Best checkpoint: step {best['step']}" in page and 'src="eval_accuracy.png"' in page
    assert f"<td>{pct(h['accuracy'], 3)}</td>" in page  # the report's accuracies carry their interval too


def test_eval_with_other_data_leaves_best_alone(tiny_run, tmp_path):
    before = read_best(tiny_run)
    gsm = write_jsonl(tmp_path / "gsm.jsonl", [
        {"question": "Tom has 3 apples and eats 1. How many are left?", "answer": "He has 3 - 1 = 2.\n#### 2"},
        {"question": "A box holds 4 pens. How many pens do 2 boxes hold?", "answer": "#### 8"}])
    assert main(["eval", str(tiny_run), "--data", str(gsm), "--checkpoints", "0,2", "--max-new-tokens", "4"]) == 0
    res = json.loads((tiny_run / "eval" / "results-gsm.json").read_text())
    assert [e["step"] for e in res["checkpoints"]] == [0, 2]
    # Not generated rows: compared with as many training rows instead of a perturbed copy.
    assert res["checkpoints"][0]["perturbed"] is None and res["checkpoints"][0]["train"]["rows"] == 2
    assert read_best(tiny_run) == before


def test_eval_lora_checkpoint(tmp_path, tiny_model_dir):
    recipe = make_recipe(tmp_path, tiny_model_dir, [CHARS], max_steps=1)
    run = tmp_path / "run"
    assert main(["train", str(recipe), "--output-dir", str(run), "--skip-audit",
                 "--set", "model.lora.r=4", "--set", "model.lora.target_modules=[q_proj,v_proj]"]) == 0
    assert main(["eval", str(run), "--max-rows", "1", "--max-new-tokens", "4"]) == 0
    res = json.loads((run / "eval" / "results.json").read_text())
    assert [e["step"] for e in res["checkpoints"]] == [0, 1]


def test_eval_a_model_without_a_run(tmp_path, tiny_model_dir):
    data = write_jsonl(tmp_path / "eval.jsonl", generate(3, seed=9))
    out = tmp_path / "out"
    assert main(["eval", str(tiny_model_dir), "--data", str(data), "--template", "plain_en",
                 "--max-new-tokens", "4", "--output-dir", str(out)]) == 0
    res = json.loads((out / "eval" / "results.json").read_text())
    assert res["template"] == "plain_en" and [e["step"] for e in res["checkpoints"]] == [0]
    assert res["rows"] == 3 and res["data"] == str(data)  # every row of --data, not a split of it
    assert not (out / "eval" / "best.json").exists()


@pytest.mark.parametrize("argv, message", [
    (["--checkpoints", "7"], "no complete checkpoint"),
    (["--template", "chat"], "apply to a model"),
    (["--samples", "-1"], "must be 0 to 1,024"),
    (["--samples", "100000"], "must be 0 to 1,024"),  # accepted before, then sampling for days
    (["--samples", "99999999999"], "must be 0 to 1,024"),
    (["--max-rows", "0"], "must be at least 1"),
    (["--max-new-tokens", "99999999999"], "must be 1 to 1,048,576"),
])
def test_eval_bad_flags_for_a_run(tiny_run, capsys, argv, message):
    assert main(["eval", str(tiny_run), *argv]) == 2
    assert message in capsys.readouterr().err


def test_sigterm_ends_an_evaluation_at_once(tiny_run, tmp_path):
    # SIGTERM keeps its default action in eval (no Python handler that a long C call would hold back): the process
    # ends while it samples, leaving results.json as it was (no half-written file: grpokit.run.writer).
    import os
    import shutil
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    import grpokit
    from conftest import DEADLINE_SLACK_S

    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    proc = subprocess.Popen([sys.executable, "-m", "grpokit", "eval", str(run), "--samples", "1024",
                             "--max-new-tokens", "8"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "PYTHONPATH": os.pathsep.join(  # the run's reward_fns: tests/
                                [str(Path(grpokit.__file__).parents[1]), str(Path(__file__).parent)])})
    for line in proc.stdout:  # the evaluation samples
        if "decoding loop applies: temperature" in line:
            break
    sent = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=DEADLINE_SLACK_S) == -signal.SIGTERM
    assert time.monotonic() - sent < DEADLINE_SLACK_S
    assert not any(p.name.endswith(".tmp") for p in (run / "eval").glob(".*")) if (run / "eval").is_dir() else True


def test_eval_model_needs_data(tiny_model_dir, capsys):
    assert main(["eval", str(tiny_model_dir)]) == 2
    assert "--data" in capsys.readouterr().err


GSM8K_TEST = REPO / ".." / "shared" / "data" / "gsm8k" / "test.jsonl"


@pytest.mark.skipif(not GSM8K_TEST.is_file(), reason="GSM8K is not in ../shared/data/gsm8k")
def test_gsm8k_test_set_loads_as_eval_data(tmp_path, tiny_model_dir):
    from grpokit.evaluation.runs import eval_sets, recipe_for_model

    recipe = recipe_for_model(str(tiny_model_dir), str(GSM8K_TEST), None, "plain_en", None, 16)
    sets = eval_sets(recipe, str(GSM8K_TEST), max_rows=5, train_rows=generate(10, seed=1))
    assert len(sets.heldout) == 5 and sets.perturbed is None and len(sets.train) == 5  # not generated: train gap
    first = sets.heldout[0]
    assert first["answer"].endswith("#### 18")  # Janet's ducks
    assert check_math("She makes 9 * 2 = 18 dollars.\nFinal answer: $18", first["answer"]).reward == 1.0
