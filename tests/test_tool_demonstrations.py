"""The SFT warm start of tool tasks: generated calculator rows, demonstrations played on the environment and
rendered as GRPO's rollout renders them, the --init-from prompt check, the tools demo's plumbing. Tiny models."""
from __future__ import annotations

import copy
import json

import pytest
import yaml
from conftest import REPO

from grpokit.errors import GrpokitError

TOOLS = REPO / "src" / "grpokit" / "datasets" / "tools"
SFT_RECIPE = REPO / "recipes" / "smollm2-calculator-sft.yaml"
GRPO_RECIPE = REPO / "recipes" / "smollm2-calculator-tools.yaml"


def _bundled(name: str) -> list[dict]:
    return [json.loads(line) for line in (TOOLS / name).read_text().splitlines()]


def _recipe(path, model_dir, *more):
    from grpokit.recipe import load_recipe

    return load_recipe(path, [f"model.name={model_dir}", "model.gradient_checkpointing=false", *more])


# ------------------------------------------------------------------ the generated rows
def test_the_bundled_calculator_rows_are_the_generators_and_the_held_out_ones_are_disjoint():
    from grpokit.data import question_keys
    from grpokit.families.tools import generate_tool_rows

    held_out, train = _bundled("calculator-eval.jsonl"), _bundled("calculator.jsonl")
    # the commands in grpokit.families.tools's docstring (and docs/tools.md) rebuild both files exactly
    assert held_out == generate_tool_rows(64, 101)
    assert train == generate_tool_rows(320, 102, question_keys([str(TOOLS / "calculator-eval.jsonl")]))
    assert not {r["question"] for r in held_out} & {r["question"] for r in train}


def test_every_generated_row_is_a_valid_tool_row_whose_call_gives_its_answer():
    from grpokit.families.tools import generate_tool_rows
    from grpokit.envs import check_tool_row
    from grpokit.envs.calculator import CalculatorEnv

    for i, row in enumerate(generate_tool_rows(40, 3)):
        assert check_tool_row(row, f"row {i}") == []
        (call,) = row["expected_calls"]
        assert str(getattr(CalculatorEnv(), call["name"])(**call["arguments"])) == row["answer"], row


# ------------------------------------------------------------------ demonstrations = GRPO's rollout
def _scripted_model(demos, tokenizer):
    """Stands in for generate in TRL's rollout: given a context that is a prefix of a demonstration, the model turn
    that follows it there (its run of loss tokens). A context no demonstration has is drift: the test fails."""
    def generate(prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
        out = []
        for p in map(list, prompt_ids):
            match = [(ids, mask) for ids, mask in demos if ids[:len(p)] == p and len(ids) > len(p) and mask[len(p)]]
            assert match, f"GRPO's rollout built a context no demonstration has: ...{tokenizer.decode(p[-60:])!r}"
            ids, mask = match[0]
            end = len(p)
            while end < len(ids) and mask[end]:
                end += 1
            out.append(ids[len(p):end])
        return out, None
    return generate


def test_a_demonstration_is_the_token_sequence_grpos_rollout_trains_on(tiny_tool_model_dir, tmp_path):
    from trl import GRPOTrainer

    from grpokit import models
    from grpokit.envs import tool_setup, training_tools
    from grpokit.recipe import build_prompt_dataset, grpo_args
    from grpokit.rewards import build_reward
    from grpokit.task import template_of
    from grpokit.training.sft import demonstration_dataset

    recipe = _recipe(GRPO_RECIPE, tiny_tool_model_dir, "train.num_generations=2", "train.per_device_train_batch_size=2")
    rows = [r for r in _bundled("calculator.jsonl") if r["expected_calls"][0]["name"] == "subtract"][:1] + \
        [r for r in _bundled("calculator.jsonl") if r["expected_calls"][0]["name"] == "add"][:1]
    sft_tokenizer = models.load_recipe_tokenizer(recipe.model)
    demos = [(d["input_ids"], d["completion_mask"]) for d in demonstration_dataset(rows, recipe, sft_tokenizer, [])]

    # GRPO's side, wired as training wires it (its own tokenizer: GRPO sets the tool template itself)
    tokenizer = models.load_recipe_tokenizer(recipe.model)
    train_rows, tool_kwargs = tool_setup(recipe, tokenizer, rows)
    dataset, dropped = build_prompt_dataset(train_rows, template_of(recipe), tokenizer, recipe.train.max_prompt_length,
                                            training_tools(recipe))
    assert dropped == 0
    args = grpo_args(recipe, tmp_path)
    trainer = GRPOTrainer(model=models.load_recipe_model(recipe.model), args=args, processing_class=tokenizer,
                          reward_funcs=[build_reward(r.name, r.params) for r in recipe.rewards],
                          train_dataset=dataset, **tool_kwargs)
    trainer._generate_single_turn = _scripted_model(demos, tokenizer)
    played = {}
    generate = trainer._generate
    trainer._generate = lambda prompts: played.setdefault("out", generate(prompts))
    trainer.model.train()
    batch = trainer._generate_and_score_completions([dataset[0], dataset[1]])

    prompt_ids, completion_ids, tool_mask, completions = played["out"][:4]
    for i, (ids, mask) in enumerate(demos):
        assert prompt_ids[i] + completion_ids[i] == ids          # token for token
        assert [0] * len(prompt_ids[i]) + tool_mask[i] == mask   # loss on the model's turns, not on tool results
        assert [m["role"] for m in completions[i]] == ["assistant", "tool", "assistant"]
        assert completions[i][0]["tool_calls"][0]["function"] == dict(rows[i]["expected_calls"][0])
        assert trainer.environments[i].calls == [(c["name"], c["arguments"]) for c in rows[i]["expected_calls"]]
    assert batch["advantages"] is not None
    assert trainer._metrics["train"]["rewards/task_success/mean"][-1] == 1.0  # the demonstrated episodes succeed


def test_the_sft_tokenizer_saves_the_tool_template_and_its_parser(tiny_tool_model_dir, tmp_path):
    from trl.chat_template_utils import parse_response, supports_tool_calling

    from grpokit import models
    from grpokit.envs.chat import TOOL_CHATML
    from grpokit.training.sft import demonstration_dataset

    recipe = _recipe(SFT_RECIPE, tiny_tool_model_dir)
    tokenizer = models.load_recipe_tokenizer(recipe.model)
    demonstration_dataset(_bundled("calculator.jsonl")[:1], recipe, tokenizer, [])
    tokenizer.save_pretrained(tmp_path)  # what SFTTrainer writes with every checkpoint
    back = models.load_tokenizer(str(tmp_path))
    # GRPO --init-from the SFT run reads this tokenizer: same template, and TRL's tool-call parser with it
    assert back.chat_template == TOOL_CHATML and supports_tool_calling(back)
    prompt = back.apply_chat_template([{"role": "user", "content": "2+3?"}], tokenize=False, add_generation_prompt=True)
    call = '<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": 3}}\n</tool_call><|im_end|>'
    parsed = parse_response(back, back(call)["input_ids"], prefix=back(prompt)["input_ids"])
    assert parsed["tool_calls"][0]["function"] == {"name": "add", "arguments": {"a": 2, "b": 3}}


def _row(**changes):
    row = copy.deepcopy(_bundled("calculator.jsonl")[0])
    row.update(changes)
    return row


DEMO_PROBLEMS = [  # (row, what the refusal says)
    (_row(expected_calls=None), "has no expected_calls"),
    (_row(answer="1000"), "is not the row's answer"),
    (_row(expected_calls=[{"name": "divide", "arguments": {"a": 4, "b": 0}}]), "failed in the environment"),
    (_row(expected_calls=[{"name": "power", "arguments": {"a": 4, "b": 2}}]), "has no tool 'power'"),
    (_row(expected_calls=[{"name": "_served", "arguments": {}}]), "has no tool '_served'"),
]


@pytest.mark.parametrize("row,what", DEMO_PROBLEMS)
def test_a_row_that_cannot_be_demonstrated_is_refused_with_where_and_fix(row, what, tiny_tool_model_dir):
    from grpokit import models
    from grpokit.training.sft import demonstration_dataset

    recipe = _recipe(SFT_RECIPE, tiny_tool_model_dir)
    with pytest.raises(GrpokitError) as e:
        demonstration_dataset([row], recipe, models.load_recipe_tokenizer(recipe.model), [])
    problem = e.value.problems[0]
    assert what in problem.message and "calculator.jsonl row" in problem.where and problem.fix


def test_demonstrations_longer_than_grpos_limits_are_left_out_and_said(tiny_tool_model_dir):
    from grpokit import models
    from grpokit.training.sft import demonstration_dataset

    recipe = _recipe(SFT_RECIPE, tiny_tool_model_dir)
    rows = _bundled("calculator.jsonl")[:10]
    tokenizer = models.load_recipe_tokenizer(recipe.model)
    lengths = [len(d["input_ids"]) - d["completion_mask"].index(1)
               for d in demonstration_dataset(rows, recipe, tokenizer, [])]
    assert len(set(lengths)) > 1  # the rows' numbers differ in digits: so do their episodes' lengths
    limit, notes = max(lengths) - 1, []
    left_out = sum(n > limit for n in lengths)
    assert 2 * left_out <= 10, lengths  # few of them are the longest: those are left out and said
    shorter = _recipe(SFT_RECIPE, tiny_tool_model_dir, f"train.max_completion_length={limit}")
    kept = demonstration_dataset(rows, shorter, tokenizer, notes)
    assert len(kept) == 10 - left_out and len(notes) == 1, notes
    assert notes[0].startswith(f"left out {left_out} of 10 demonstration(s) are longer than GRPO's limits")
    assert f"max_completion_length={limit};" in notes[0]
    assert notes[0].endswith(f"train.max_completion_length >= {max(lengths)} keeps them all")
    # most of them too long (the 64-token calculator recipe left out 316 of 320 and taught the call, not the
    # answer): refused, with the length that keeps them all
    short = sorted(lengths)[len(lengths) // 2 - 1] - 1  # at least 6 of the 10 are longer
    with pytest.raises(GrpokitError) as e:
        demonstration_dataset(rows, _recipe(SFT_RECIPE, tiny_tool_model_dir, f"train.max_completion_length={short}"),
                              tokenizer, [])
    problem = e.value.problems[0]
    assert problem.where == "train.max_completion_length" and "of 10 demonstration(s) are longer" in problem.message
    assert f"train.max_completion_length >= {max(lengths)}" in problem.fix


def test_grpo_counts_the_tool_schemas_in_a_prompts_length(tokenizer):
    from transformers import AutoTokenizer

    from grpokit.envs import tool_schemas
    from grpokit.envs.calculator import CalculatorEnv
    from grpokit.envs.chat import ensure_tool_template
    from grpokit.recipe import build_prompt_dataset
    from grpokit.templates import PromptTemplate

    tok = AutoTokenizer.from_pretrained(tokenizer.name_or_path)
    ensure_tool_template(tok)
    template, rows = PromptTemplate("chat"), _bundled("calculator.jsonl")[:2]
    bare = len(template.encode(tok, template.build(rows[0]["question"])))
    tools = tool_schemas(CalculatorEnv)
    assert len(template.encode(tok, template.build(rows[0]["question"]), tools)) > bare + 200
    # a limit the bare prompt fits but the prompt TRL renders (with the tools) does not: refused, not cut silently
    with pytest.raises(GrpokitError, match="all 2 prompts are longer"):
        build_prompt_dataset(rows, template, tok, bare + 50, tools)
    assert build_prompt_dataset(rows, template, tok, bare + 50)[1] == 0


# ------------------------------------------------------------------ --init-from: the prompts of the warm start
def test_the_bundled_sft_and_grpo_recipes_build_the_same_prompts():
    from grpokit.recipe import load_recipe
    from grpokit.training import prompt_drift

    assert prompt_drift(load_recipe(SFT_RECIPE), load_recipe(GRPO_RECIPE)) == []


def _changed(recipe, section, **values):
    part = getattr(recipe, section)
    return recipe.model_copy(update={section: None if values.get("gone") else part.model_copy(update=values)})


@pytest.mark.parametrize("change,differs", [
    (lambda r: r, []),
    (lambda r: _changed(r, "data", system_prompt="Be brief."), ["data.system_prompt"]),
    (lambda r: _changed(r, "model", enable_thinking=False), ["model.enable_thinking"]),
    (lambda r: _changed(r, "env", params={"max_steps": 3}), ["env.params"]),
    (lambda r: _changed(r, "env", gone=True), ["env.name", "env.params"]),  # a warm start without the tools
])
def test_init_from_says_when_the_warm_start_saw_other_prompts(change, differs):
    from grpokit.recipe import load_recipe
    from grpokit.run import describe_lineage
    from grpokit.training import prompt_drift

    sft, grpo = load_recipe(SFT_RECIPE), load_recipe(GRPO_RECIPE)
    assert prompt_drift(change(sft), grpo) == differs
    line = describe_lineage({"run": "runs/sft", "step": 12, "kind": "run-last-checkpoint", "prompt_differs": differs})
    assert line.startswith("started from runs/sft step 12")
    assert ("warmed up on prompts this run does not show it" in line) == bool(differs)
    if differs:
        assert ", ".join(differs) in line


# ------------------------------------------------------------------ grpokit demo --task tools
def test_the_tools_demo_runs_sft_then_grpo_from_it_and_evaluates_three_models(tiny_tool_model_dir, tmp_path, capsys):
    from grpokit.demo import TASKS, run_demo

    assert TASKS["tools"].module == "tools"
    small = [f"model.name={tiny_tool_model_dir}", "model.gradient_checkpointing=false", "train.max_steps=1",
             "train.save_steps=1", "train.per_device_train_batch_size=2", "train.num_generations=2",
             "train.max_completion_length=72", "data.eval_max_rows=2"]
    result = run_demo(str(tmp_path / "demo"), small, task="tools")
    out = capsys.readouterr().out
    entries = result["evaluation"]["checkpoints"]
    assert [e["step"] for e in entries] == [0, "sft", 1] and result["columns"] == ["base", "after SFT", "after GRPO"]
    assert all(e["episodes"] == 2 and e["greedy"] for e in entries)
    sft_run = tmp_path / "demo-sft"
    assert entries[1]["model"] == str(sft_run / "checkpoints" / "checkpoint-1")
    status = json.loads((tmp_path / "demo" / "run.json").read_text())
    assert status["init_from"]["run"] == str(sft_run) and status["init_from"]["prompt_differs"] == []
    assert json.loads((sft_run / "run.json").read_text())["kind"] == "sft"
    assert json.loads((tmp_path / "demo" / "eval" / "results-tools.json").read_text())["checkpoints"] == entries
    assert json.loads((tmp_path / "demo" / "demo.json").read_text())["seconds_total"] > 0
    for title in ("task success", "episodes with a tool call", "valid arguments", "after SFT", "after GRPO"):
        assert title in out, out
    assert (tmp_path / "demo" / "report" / "report.html").is_file()
    # a second demo replaces both folders (their records say demo)
    run_demo(str(tmp_path / "demo"), small + ["train.seed=1"], task="tools")
    assert yaml.safe_load((sft_run / "config.yaml").read_text())["train"]["seed"] == 1
