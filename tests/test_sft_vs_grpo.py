"""`grpokit demo --task sft-vs-grpo` (grpokit.demo.sft_vs_grpo) on a tiny model: four pipelines from one base, each
final model on held-out, perturbed and rewritten rows, one table and a verdict said from the numbers."""
from __future__ import annotations

import html
import json

import pytest
from conftest import make_recipe

from grpokit.cli import main
from grpokit.demo import sft_vs_grpo
from grpokit.demo.common import said
from grpokit.errors import GrpokitError
from grpokit.report.comparison import PAGE, PLOT, RESULT_FILE, comparison_table


@pytest.fixture(scope="module")
def compared(tmp_path_factory, tiny_model_dir):
    tmp = tmp_path_factory.mktemp("sftvsgrpo")
    recipe = make_recipe(tmp, tiny_model_dir, [{"name": "math_correctness"}, {"name": "format", "weight": 0.2}],
                         sections={"health": {"probe_rows": 0}})
    out = tmp / "cmp"
    # as a user runs it on their own recipes: `grpokit compare SFT.yaml GRPO.yaml` (here one recipe as both)
    assert main(["compare", str(recipe), str(recipe), "--output-dir", str(out)]) == 0
    result = json.loads((out / RESULT_FILE).read_text())
    return tmp, recipe, out, result


def test_compare_refuses_a_recipe_against_a_run_and_flags_of_the_other_form(tmp_path, tiny_model_dir, capsys):
    recipe = make_recipe(tmp_path, tiny_model_dir, [{"name": "math_correctness"}])
    (tmp_path / "run").mkdir()
    assert main(["compare", str(recipe), str(tmp_path / "run")]) == 2
    assert "one recipe and one run given" in capsys.readouterr().err
    assert main(["compare", str(tmp_path / "run"), str(tmp_path / "run"), "--set", "train.max_steps=1"]) == 2
    assert "applies to two recipes" in capsys.readouterr().err
    assert main(["compare", str(recipe), str(recipe), "--data", "x.jsonl"]) == 2
    err = capsys.readouterr().err
    assert "applies to two runs" in err and "Traceback" not in err


def test_four_pipelines_trained_from_one_base_and_each_final_model_evaluated(compared):
    tmp, recipe, out, result = compared
    assert list(result["models"]) == ["base", *sft_vs_grpo.PIPELINES]
    for name in sft_vs_grpo.PIPELINES:
        run = json.loads((out / name / "run.json").read_text())
        assert run["status"] == "completed", name
    lineage = {n: json.loads((out / n / "run.json").read_text()).get("init_from") for n in sft_vs_grpo.PIPELINES}
    assert lineage["sft"] is None and lineage["grpo"] is None
    assert lineage["sft-then-grpo"]["run"] == str((out / "sft").resolve())  # GRPO continues the SFT model
    assert lineage["grpo-then-sft"]["run"] == str((out / "grpo").resolve())  # the polish starts from GRPO's
    assert result["continuing"] == {"train.learning_rate": [1e-3, 3e-6]}  # continuing settings, said
    assert json.loads((out / "grpo-then-sft" / "run.json").read_text())["step"] == sft_vs_grpo.POLISH_STEPS
    for name, m in result["models"].items():
        assert set(m["sets"]) == {"heldout", "perturbed", "rewritten"}, name
        assert all(s["rows"] == 6 and 0 <= s["accuracy"] <= 1 for s in m["sets"].values())
        assert all(len(s["scores"]) == 6 and abs(sum(s["scores"]) / 6 - s["accuracy"]) < 1e-9
                   for s in m["sets"].values())  # a score per row, for the paired differences
    minutes = {n: result["models"][n]["minutes"] for n in sft_vs_grpo.PIPELINES}
    assert minutes["sft-then-grpo"] > minutes["sft"] and minutes["grpo-then-sft"] > minutes["grpo"]  # all stages
    assert json.loads((out / RESULT_FILE).read_text())["verdict"] == result["verdict"]
    assert result["verdict"][0].startswith("best final model by held-out plus rewritten accuracy: ")
    assert any(line.startswith("GRPO's own share (sft-then-grpo minus sft): held-out ") for line in result["verdict"])
    # retention: every model also on the JSON family's held-out rows; each GRPO pipeline beside the trained SFT
    # checkpoint whose held-out accuracy is nearest its own (never the base: it trained on nothing), the base's beside
    assert all(m["retention"]["rows"] == 500 and m["retention"]["metric"] == "field accuracy"
               for m in result["models"].values())
    matched = result["retention"]["matched"]
    assert set(matched) == {"grpo", "sft-then-grpo", "grpo-then-sft"}
    assert all(m["sft_step"] in (1, 2) and len(m["difference"]) in (2, 4) for m in matched.values())
    assert all(m["start_retention"] == result["models"]["base"]["retention"]["accuracy"] for m in matched.values())
    assert any(line.startswith("retention of builtin:json/retention.jsonl at matched held-out accuracy (the start "
                               "model kept ")
               for line in result["verdict"])
    assert "retention" in comparison_table(result["models"])[0]


def test_retention_is_another_family_on_500_unseen_rows_scored_on_what_the_skill_is():
    """JSON's retention reads the fields from the first object anywhere (a stray fence does not zero a right one);
    the JSON comparison keeps arithmetic's 500 held-out rows; neither shares a row with its family's other sets."""
    from grpokit.data import load_datasets
    from grpokit.demo.common import RECIPES
    from grpokit.recipe import load_recipe

    json_kept = sft_vs_grpo.retention_recipe(load_recipe(RECIPES / "smollm2-arithmetic.yaml"))
    assert json_kept.data.eval == "builtin:json/retention.jsonl"
    assert [(r.name, r.params) for r in json_kept.rewards] == [("json_fields", {"anywhere": True})]
    arithmetic_kept = sft_vs_grpo.retention_recipe(load_recipe(RECIPES / "smollm2-json-extraction.yaml"))
    assert arithmetic_kept.data.eval == "builtin:arithmetic/eval500.jsonl"
    for kept, shown in ((json_kept, "smollm2-json-extraction.yaml"), (arithmetic_kept, "smollm2-arithmetic.yaml")):
        rows = load_datasets(kept)[1]
        train, heldout = load_datasets(load_recipe(RECIPES / shown))[:2]
        assert len(rows) == 500
        assert not {r["question"] for r in rows} & {r["question"] for r in [*train, *heldout]}


def test_the_retention_verdict_says_when_a_pair_is_not_matched():
    """RL's Razor compares forgetting at equal new-task accuracy: a GRPO model far from every SFT checkpoint is said
    to be unmatched (the measured case: GRPO from the base at 26%, where the base, 12%, was its nearest and no SFT
    checkpoint lay within 5 points; the base is no longer a candidate, since it trained on nothing)."""
    pair = {"sft_retention": 0.483, "retention": 0.539, "difference": [0.056, 0.0105]}
    matched = {"grpo": {**pair, "sft_step": 10, "heldout": 0.26, "sft_heldout": 0.45},
               "sft-then-grpo": {**pair, "sft_step": 20, "heldout": 0.58, "sft_heldout": 0.59},
               "edge": {**pair, "sft_step": 20, "heldout": 0.64, "sft_heldout": 0.59}}
    (line,) = sft_vs_grpo.retention_verdict(matched, None)
    assert line.startswith("retention of another task at matched held-out accuracy: ")  # no start given: none said
    grpo, continued, edge = line.split(" against SFT step ")[1:]  # each pair, from its checkpoint on
    assert "not a matched pair: no SFT checkpoint within 5 points" in grpo
    assert "not a matched pair" not in continued and "not a matched pair" not in edge  # 1 and exactly 5 points apart
    matched = {name: {**m, "start_retention": 0.61} for name, m in matched.items()}
    (line,) = sft_vs_grpo.retention_verdict(matched, None)
    assert line.startswith("retention of another task at matched held-out accuracy (the start model kept 61.0%): ")


@pytest.fixture(scope="module")
def countdown_compared(tmp_path_factory, tiny_model_dir):
    """The comparison on the countdown family: its own variants (rewritten, harder) and its reward."""
    import yaml
    from conftest import write_jsonl

    from grpokit.families import FAMILIES

    tmp = tmp_path_factory.mktemp("countdown")
    rows = FAMILIES["countdown"].generators["countdown"].make(24, 7, None, count=3)
    recipe = make_recipe(tmp, tiny_model_dir, [{"name": "countdown"}], sections={"health": {"probe_rows": 0}},
                         max_completion_length=12)
    spec = yaml.safe_load(recipe.read_text())
    spec["data"]["train"] = str(write_jsonl(tmp / "countdown.jsonl", rows))
    recipe.write_text(yaml.safe_dump(spec))
    return sft_vs_grpo.run(str(tmp / "cmp"), recipes=(recipe, recipe))


def test_the_comparison_on_countdown_evaluates_its_variants_and_retention(countdown_compared):
    result = countdown_compared
    for name, m in result["models"].items():
        assert set(m["sets"]) == {"heldout", "rewritten", "harder"}, name
        assert all(s["rows"] == 6 and s["metric"] == "solve rate" for s in m["sets"].values())
        assert m["retention"]["rows"] == 500
    columns, _ = comparison_table(result["models"])
    assert columns[:3] == ["held-out", "rewritten wording", "harder (one more number)"]
    assert any(line.startswith("GRPO's own share (sft-then-grpo minus sft)") for line in result["verdict"])


def test_the_comparison_has_a_page_and_grpokit_report_writes_it_again(compared, capsys):
    _, _, out, result = compared
    page = (out / PAGE).read_text()
    assert (out / PLOT).stat().st_size > 1000 and f'src="{PLOT}"' in page
    assert all(html.escape(line) in page for line in result["verdict"])
    assert all(f'href="{name}/"' in page for name in sft_vs_grpo.PIPELINES)
    (out / PAGE).unlink()
    assert main(["report", str(out)]) == 0 and (out / PAGE).is_file()
    assert main(["report", str(out), "--output-dir", str(out / "elsewhere")]) == 2
    assert "Traceback" not in capsys.readouterr().err and not (out / "elsewhere").exists()


def _models(**acc):
    """Models with (held-out, rewritten) accuracies on 100 rows each."""
    return {name: {"sets": {"heldout": {"accuracy": h, "rows": 100}, "rewritten": {"accuracy": r, "rows": 100}}}
            for name, (h, r) in acc.items()}


def test_the_verdict_says_what_the_numbers_show():
    # The measured table: SFT far ahead of GRPO, on rewritten questions too; GRPO after SFT within noise.
    lines = sft_vs_grpo.verdict(_models(base=(0.12, 0.04), sft=(0.60, 0.53), grpo=(0.30, 0.23),
                                        **{"sft-then-grpo": (0.60, 0.56), "grpo-then-sft": (0.40, 0.35)}))
    assert lines[0].startswith("best final model by held-out plus rewritten accuracy: sft-then-grpo; against sft")
    assert "GRPO's own share" in lines[1] and "+0.0 points (within noise" in lines[1]
    assert "+3.0 points (within noise" in lines[1]
    assert lines[2].endswith("SFT does not lose clearly more on new wording than GRPO here")
    # The article's claim: SFT holds on training-like questions and falls on new wording; GRPO does not.
    lines = sft_vs_grpo.verdict(_models(base=(0.1, 0.1), sft=(0.70, 0.35), grpo=(0.55, 0.52),
                                        **{"sft-then-grpo": (0.72, 0.60), "grpo-then-sft": (0.56, 0.52)}))
    assert "SFT loses clearly more on new wording than GRPO and GRPO is ahead of it there" in lines[2]
    assert "sft -35.0 points, grpo -3.0" in lines[2] and "article" not in lines[2]
    assert "+12.0 points (beyond noise" in lines[0] or "beyond noise" in lines[1]
    # As in the JSON comparison: SFT drops on new wording and GRPO gains, but SFT stays far ahead there.
    lines = sft_vs_grpo.verdict(_models(base=(0.27, 0.09), sft=(0.99, 0.80), grpo=(0.50, 0.55),
                                        **{"sft-then-grpo": (0.99, 0.80), "grpo-then-sft": (0.90, 0.87)}))
    assert "yet stays 25.0 points ahead of it there" in lines[2] and "GRPO is ahead" not in lines[2]
    assert lines[2].endswith("that GRPO answers new wording better is not shown")


def test_a_second_comparison_replaces_the_first_and_a_foreign_folder_is_refused(compared, tmp_path, capsys):
    _, recipe, out, _ = compared
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    with pytest.raises(GrpokitError) as e:
        sft_vs_grpo.run(str(tmp_path / "mine"), recipes=(recipe, recipe))
    assert "nothing was written" in str(e.value) or "grpokit writes only into a folder it made" in str(e.value)
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep me" and len(list((tmp_path / "mine").iterdir())) == 1
    assert main(["demo", "--task", "sft-vs-grpo", "--output-dir", str(out / "sft")]) == 2  # a run, not a comparison
    assert "Traceback" not in capsys.readouterr().err


def test_a_difference_on_the_same_rows_is_judged_by_its_paired_noise():
    rows = 100
    a = {"sets": {"heldout": {"accuracy": 0.60, "rows": rows, "scores": [float(i < 60) for i in range(rows)]}}}
    b = {"sets": {"heldout": {"accuracy": 0.50, "rows": rows, "scores": [float(i < 50) for i in range(rows)]}}}
    paired = sft_vs_grpo._difference(a, b, "heldout")
    assert abs(paired[0] - 0.10) < 1e-9 and 2 * paired[1] < 0.07  # a right wherever b is: ~6 points of noise
    assert "beyond noise" in said(paired)
    for m in (a, b):
        del m["sets"]["heldout"]["scores"]
    unpaired = sft_vs_grpo._difference(a, b, "heldout")  # two independent shares: ~14 points
    assert 2 * unpaired[1] > 0.13 and "within noise" in said(unpaired)


def test_partial_scores_pair_row_by_row():
    """A JSON task's score is the share of fields right: rows pair by their scores, not by right/wrong."""
    a = {"sets": {"heldout": {"accuracy": 0.5, "rows": 4, "scores": [1.0, 2 / 3, 1 / 3, 0.0]}}}
    b = {"sets": {"heldout": {"accuracy": 0.25, "rows": 4, "scores": [2 / 3, 1 / 3, 0.0, 0.0]}}}
    d = sft_vs_grpo._difference(a, b, "heldout")
    assert abs(d.difference - 0.25) < 1e-9 and d.se > 0 and not d.exact  # not pass/fail: the 2 SE rule
    assert "2 SE =" in said(d)


def test_the_table_has_a_column_per_set_the_family_makes_and_its_other_metrics():
    held = {"accuracy": 0.5, "rows": 4, "metric": "field accuracy", "format_rate": None,
            "metrics": {"field accuracy": 0.5, "valid rate": 0.75}}
    models = {"base": {"sets": {"heldout": held, "rewritten": dict(held)}, "minutes": None},
              "sft": {"sets": {"heldout": held, "rewritten": dict(held)}, "minutes": 1.5}}
    columns, rows = comparison_table(models)
    assert columns == ["held-out", "rewritten wording", "held-out valid rate", "format", "minutes"]
    assert rows[1] == ("sft", "50.0% (15–85)", "50.0% (15–85)", "75.0% (30–95)", "-", "1.5")  # with the intervals
    assert sft_vs_grpo.verdict(models)[0].startswith("best final model by held-out plus rewritten field accuracy: ")


@pytest.mark.parametrize("task", [t for t, d in __import__("grpokit.demo", fromlist=["TASKS"]).TASKS.items()
                                  if d.module == "sft_vs_grpo"])
def test_each_familys_comparison_pairs_an_sft_and_a_grpo_recipe_on_the_same_rows(task):
    from grpokit.demo import TASKS
    from grpokit.demo.common import RECIPES
    from grpokit.families import family_of
    from grpokit.recipe import load_recipe

    sft_path, grpo_path = (RECIPES / name for name in TASKS[task].recipes)
    sft, grpo = sft_vs_grpo._recipes(None, sft_path, grpo_path)
    assert family_of(sft.rewards) is family_of(grpo.rewards) is not None
    assert load_recipe(sft_path).data.template == load_recipe(grpo_path).data.template


def test_sampled_pass_at_1_is_a_column_and_a_paired_share_in_the_verdict():
    """GRPO's gain can be in what sampling finds (as training samples) while greedy decoding hides it."""
    def model(greedy, hits):
        return {"sets": {"heldout": {"accuracy": greedy, "rows": len(hits), "scores": [greedy] * len(hits),
                                     "samples_per_problem": 8, "sample_hits": hits,
                                     "pass_at_k": {"1": sum(hits) / 8 / len(hits), "8": sum(h > 0 for h in hits) / len(hits)}}},
                "minutes": 1.0}

    models = {"sft": model(0.6, [2] * 50 + [0] * 50), "grpo": model(0.3, [1] * 100),
              "sft-then-grpo": model(0.6, [6] * 50 + [0] * 50)}
    columns, rows = comparison_table(models)
    assert columns[:3] == ["held-out", "held-out sampled pass@1", "held-out sampled pass@8"]
    assert rows[0][:4] == ("sft", "60.0% (50–69)", "12.5% (7–20)", "50.0% (40–60)")
    share = next(line for line in sft_vs_grpo.verdict(models) if line.startswith("GRPO's own share"))
    assert "held-out +0.0 points" in share and "sampled pass@1 on held-out rows +25.0 points (beyond noise" in share


def test_a_damaged_comparison_file_is_named_with_its_fix_not_a_traceback(tmp_path, capsys):
    from grpokit.run.writer import write_file
    from grpokit.run.claims import claim

    folder = tmp_path / "cmp"
    claim(folder, "comparison", {RESULT_FILE: "file"}, "a new folder")
    write_file(folder / RESULT_FILE, '{"models": {"sft": ', within=folder)  # cut mid-write by hand
    assert main(["report", str(folder)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and str(folder / RESULT_FILE) in err and "cannot read the comparison" in err
    assert "grpokit demo --task sft-vs-grpo" in err  # the fix: run it again


def test_matched_retention_has_no_pairs_when_the_sft_run_saved_no_checkpoint(tmp_path):
    """The start is never a match, so an SFT run without a complete checkpoint leaves nothing to match with: no
    pairs (and no verdict line), not an error."""
    from grpokit.demo.common import RECIPES
    from grpokit.recipe import load_recipe

    recipe = load_recipe(RECIPES / "smollm2-arithmetic.yaml")
    retention = sft_vs_grpo.retention_recipe(recipe)
    scored = {"accuracy": 0.5, "rows": 2, "scores": [1.0, 0.0]}
    models = {n: {"sets": {"heldout": scored}, "retention": scored} for n in ("base", "sft", "grpo")}
    (tmp_path / "checkpoints").mkdir()
    assert sft_vs_grpo.matched_retention(recipe, retention, tmp_path, models, print) == {}
    assert sft_vs_grpo.retention_verdict({}, retention) == []


def test_the_wording_line_says_nothing_of_a_model_at_the_floor():
    """GRPO from the base at 0% on held-out and rewritten rows (countdown, 2026-12-06) loses nothing on new wording
    because it solves nothing: the line says so instead of reading it as robustness."""
    lines = sft_vs_grpo.verdict(_models(base=(0.0, 0.0), sft=(0.19, 0.14), grpo=(0.0, 0.0),
                                        **{"sft-then-grpo": (0.15, 0.16), "grpo-then-sft": (0.04, 0.02)}))
    assert lines[2].startswith("held-out -> rewritten: grpo at the floor on held-out rows (0.0%")
    assert "is not tested here" in lines[2] and "loses clearly more" not in lines[2]
    assert "article" not in " ".join(lines)  # what the numbers show, never an article's verdict
    assert not sft_vs_grpo.at_floor({"accuracy": 0.19, "rows": 100})
