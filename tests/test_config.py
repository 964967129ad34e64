"""Recipe validation: each bad input gives its message, with field path, line and fix; no model loads."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from grpokit.cli import main
from grpokit.errors import GrpokitError
from grpokit.recipe.load import load_recipe

REPO = Path(__file__).resolve().parents[1]
GOOD = {
    "model": {"name": "default"},
    "data": {"train": "builtin:arithmetic/train.jsonl", "template": "chat"},
    "rewards": [{"name": "math_correctness", "weight": 1.0}],
    "train": {"num_generations": 4, "per_device_train_batch_size": 8},
}


def write(tmp_path: Path, recipe: dict | str) -> Path:
    p = tmp_path / "recipe.yaml"
    p.write_text(recipe if isinstance(recipe, str) else yaml.safe_dump(recipe, sort_keys=False))
    return p


def patch(update: dict) -> dict:
    out = yaml.safe_load(yaml.safe_dump(GOOD))
    for dotted, value in update.items():
        node = out
        *path, last = dotted.split(".")
        for k in path:
            node = node[int(k)] if isinstance(node, list) else node.setdefault(k, {})
        node[last] = value
    return out


CASES = [
    # (id, change to the good recipe, substrings expected in the report)
    ("typo in a train key", {"train.learnig_rate": 1e-5}, ["train.learnig_rate", "unknown key", "did you mean 'learning_rate'"]),
    ("typo in a section", {"modle": {"name": "x"}}, ["modle", "unknown key", "did you mean 'model'"]),
    ("wrong type", {"train.learning_rate": "fast"}, ["train.learning_rate", "fast", "right type"]),
    ("num_generations < 2", {"train.num_generations": 1}, ["train.num_generations", ">= 2"]),
    ("learning_rate <= 0", {"train.learning_rate": 0}, ["train.learning_rate", "> 0"]),
    ("temperature <= 0", {"train.temperature": 0}, ["train.temperature", "> 0"]),
    ("eval_fraction >= 1", {"data.eval_fraction": 1.5}, ["data.eval_fraction", "< 1"]),
    ("unknown template", {"data.template": "alpaca"}, ["data.template", "plain_zh", "chat"]),
    ("generation batch not divisible", {"train.num_generations": 3},
     ["train.num_generations", "not divisible", "multiple of 3"]),
    ("unknown reward lists the valid ones", {"rewards": [{"name": "math_corectness"}]},
     ["rewards.0.name", "unknown reward", "did you mean 'math_correctness'", "format"]),
    ("unknown reward param", {"rewards": [{"name": "format", "params": {"min_lines": 2}}]},
     ["rewards.0.params.min_lines", "no parameter", "min_reasoning_lines"]),
    ("missing train file", {"data.train": "nope.jsonl"}, ["data.train", "file not found", "nope.jsonl"]),
    ("missing rewards has a fix line", {"rewards": []}, ["rewards", "at least 1", "fix: add at least one reward"]),
    ("thinking without chat", {"data.template": "plain_en", "model.enable_thinking": True},
     ["model.enable_thinking", "chat template"]),
    ("all weights zero", {"rewards": [{"name": "format", "weight": 0}]}, ["every reward weight is 0"]),
    # --- built as training builds them: reward factories are called with their params
    ("reward param of the wrong type", {"rewards": [{"name": "format", "params": {"markers": 5}}]},
     ["rewards.0.params.markers", "valid list", "got 5"]),
    ("a string where a list of markers goes", {"rewards": [{"name": "math_correctness", "params": {"markers": "A:"}}]},
     ["rewards.0.params.markers", "got 'A:'"]),
    ("code_tests negative timeout", {"rewards": [{"name": "code_tests", "params": {"timeout_s": -1}}]},
     ["rewards.0.params", "timeout_s must be > 0"]),
    ("json_schema partial credit above 1", {"rewards": [{"name": "json_schema", "params": {"partial_credit": 7}}]},
     ["rewards.0.params", "partial_credit must be between 0 and 1"]),
    ("empty marker list", {"rewards": [{"name": "format", "params": {"markers": []}}]},
     ["rewards.0.params", "markers must be a non-empty list"]),
    ("negative reasoning lines", {"rewards": [{"name": "format", "params": {"min_reasoning_lines": -1}}]},
     ["rewards.0.params", "min_reasoning_lines must be >= 0"]),
    ("sql_exec zero timeout", {"rewards": [{"name": "sql_exec", "params": {"timeout_s": 0}}]},
     ["rewards.0.params", "timeout_s must be > 0"]),
    ("length negative min_chars", {"rewards": [{"name": "length", "params": {"min_chars": -5}}]},
     ["rewards.0.params", "min_chars must be >= 0"]),
    ("non-finite reward param", {"rewards": [{"name": "length", "params": {"short_penalty": float("-inf")}}]},
     ["rewards.0.params.short_penalty", "not a finite number"]),
    # --- finite numbers everywhere
    ("learning_rate inf", {"train.learning_rate": float("inf")}, ["train.learning_rate", "finite number"]),
    ("temperature inf", {"train.temperature": float("inf")}, ["train.temperature", "finite number"]),
    ("health threshold nan", {"health.kl_max": float("nan")}, ["health.kl_max", "finite number"]),
    # every section derives from recipe.section.Section: generation and selection refused inf/nan once they did not
    ("generation timeout inf", {"generation.server_timeout": float("inf")}, ["generation.server_timeout", "finite number"]),
    ("selection ema nan", {"selection.ema": float("nan")}, ["selection.ema", "finite number"]),
    # --- the scheduler is built on a one-tensor optimizer
    ("unknown scheduler", {"train.lr_scheduler_type": "nonsense_sched"},
     ["train.lr_scheduler_type", "unknown scheduler 'nonsense_sched'", "cosine"]),
    ("scheduler typo", {"train.lr_scheduler_type": "cosin"}, ["did you mean 'cosine'"]),
    ("scheduler that needs kwargs", {"train.lr_scheduler_type": "cosine_with_min_lr"},
     ["train.lr_scheduler_type", "cannot be built", "lr_scheduler_kwargs"]),
    ("scheduler that needs evaluation", {"train.lr_scheduler_type": "reduce_lr_on_plateau"},
     ["train.lr_scheduler_type", "needs evaluation"]),
    # --- trl: pass-through, checked by building the GRPOConfig
    ("trl typo", {"trl": {"epsilon_hihg": 0.28}}, ["trl.epsilon_hihg", "unknown GRPOConfig field", "did you mean 'epsilon_high'"]),
    ("trl clashes with train", {"trl": {"learning_rate": 1e-5}}, ["trl.learning_rate", "set train.learning_rate instead"]),
    ("trl sets what grpokit sets", {"trl": {"output_dir": "x"}}, ["trl.output_dir", "set by grpokit", "--output-dir"]),
    ("trl vllm settings belong to generation:", {"trl": {"use_vllm": True}}, ["trl.use_vllm", "generation: section"]),
    ("trl init kwargs belong to the model", {"trl": {"model_init_kwargs": {}}}, ["trl.model_init_kwargs", "model.init_kwargs"]),
    ("trl wrong type", {"trl": {"mask_truncated_completions": "yes"}}, ["trl.mask_truncated_completions", "boolean"]),
    ("trl out of range", {"trl": {"top_entropy_quantile": 7}}, ["trl.top_entropy_quantile", ">= 0 and <= 1"]),
    ("trl zero iterations", {"trl": {"num_iterations": 0}}, ["trl.num_iterations", ">= 1"]),
    ("trl inf", {"trl": {"epsilon_high": float("inf")}}, ["trl.epsilon_high", "not a finite number"]),
    ("GRPOConfig refuses the combination", {"trl": {"generation_batch_size": 12}},
     ["trl.generation_batch_size", "GRPOConfig refuses it", "divisible"]),
    ("unknown tracker", {"trl": {"report_to": "tensorbord"}}, ["trl.report_to", "unknown tracker", "did you mean 'tensorboard'"]),
    # --- model.init_kwargs
    ("dtype in init_kwargs", {"model.init_kwargs": {"dtype": "float16"}}, ["model.init_kwargs.dtype", "set model.dtype"]),
    ("quantized without lora", {"model.init_kwargs": {"quantization_config": {"load_in_4bit": True}}},
     ["model.init_kwargs.quantization_config", "add model.lora"]),
    ("non-finite init kwarg", {"model.init_kwargs": {"rope_theta": float("nan")}}, ["model.init_kwargs.rope_theta", "finite"]),
    # --- the model source
    ("missing local model folder", {"model.name": "/no/such/folder"}, ["model.name", "no such model folder", "/no/such/folder"]),
    ("relative missing folder", {"model.name": "./models/mine"}, ["model.name", "no such model folder"]),
]


@pytest.mark.parametrize("update,expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_recipe_reports_field_and_fix(tmp_path, update, expected):
    with pytest.raises(GrpokitError) as exc:
        load_recipe(write(tmp_path, patch(update)))
    text = exc.value.render()
    for s in expected:
        assert s in text, f"{s!r} missing from:\n{text}"
    assert exc.value.exit_code == 2


def test_every_problem_is_reported_at_once_with_line_numbers(tmp_path):
    # A type error, a typo, an unknown reward and a missing file in one recipe: four problems, one report.
    text = (
        "model:\n  name: default\n"
        "data:\n  train: missing.jsonl\n"
        "rewards:\n  - name: nope\n"
        "train:\n  learning_rate: abc\n  num_genrations: 4\n"
    )
    with pytest.raises(GrpokitError) as exc:
        load_recipe(write(tmp_path, text))
    wheres = [p.where for p in exc.value.problems]
    assert any("recipe.yaml:8 train.learning_rate" in w for w in wheres), wheres
    assert any("recipe.yaml:9 train.num_genrations" in w for w in wheres), wheres
    assert any("recipe.yaml:6 rewards.0.name" in w for w in wheres), wheres
    assert any("recipe.yaml:4 data.train" in w for w in wheres), wheres


def test_set_overrides_are_typed_and_validated(tmp_path):
    path = write(tmp_path, GOOD)
    r = load_recipe(path, ["train.learning_rate=2e-5", "train.max_steps=3", "model.lora.r=8"])
    assert r.train.learning_rate == 2e-5 and r.train.max_steps == 3 and r.model.lora.r == 8
    with pytest.raises(GrpokitError, match="train.num_generations"):
        load_recipe(path, ["train.num_generations=0"])


def test_relative_data_paths_resolve_from_the_recipe_folder(tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "t.jsonl").write_text('{"question": "q", "answer": "1"}\n')
    r = load_recipe(write(tmp_path, patch({"data.train": "d/t.jsonl"})))
    assert r.resolve_data_path(r.data.train) == str(tmp_path / "d" / "t.jsonl")


def test_cli_prints_problems_without_traceback(tmp_path, capsys):
    path = write(tmp_path, patch({"train.num_generations": 1, "rewards": [{"name": "bogus"}]}))
    code = main(["recipe", "check", str(path)])
    err = capsys.readouterr().err
    assert code == 2
    assert "Traceback" not in err
    assert "train.num_generations" in err and "bogus" in err and "fix:" in err


def test_invalid_yaml_names_the_line(tmp_path):
    with pytest.raises(GrpokitError) as exc:
        load_recipe(write(tmp_path, "model:\n  name: [unclosed\ndata: {}\n"))
    assert "recipe.yaml:" in exc.value.problems[0].where and "YAML" in exc.value.problems[0].message


# Recipes whose data is made by a grpokit command first (the README says so): the command to run.
RECIPE_DATA_SETUP = {"smollm2-humaneval.yaml": ["data", "import", "humaneval", "{data}/humaneval.jsonl"]}


@pytest.mark.parametrize("path", sorted((REPO / "recipes").glob("*.yaml")), ids=lambda p: p.name)
def test_bundled_recipes_validate(path, tmp_path, monkeypatch):
    # The Qwen3 recipes load GSM8K from the hub; validation itself needs no network.
    if path.name == "smollm2-preference.yaml":  # names the reward model `grpokit rm train` writes to runs/rm-style
        monkeypatch.chdir(tmp_path)
        (tmp_path / "runs" / "rm-style").mkdir(parents=True)
        for name in ("rm.json", "config.json"):  # what validation reads; no weights load
            (tmp_path / "runs" / "rm-style" / name).write_text("{}")
    if path.name in RECIPE_DATA_SETUP:
        # Lay the recipe out as in the repo (recipes/ next to data/) and make its data the documented way.
        (tmp_path / "recipes").mkdir()
        path = Path(shutil.copy(path, tmp_path / "recipes" / path.name))
        data = tmp_path / "data"
        assert main([a.format(data=data) for a in RECIPE_DATA_SETUP[path.name]]) == 0
    recipe = load_recipe(path)
    assert recipe.rewards


def test_sft_control_recipe_matches_the_demo():
    # The SFT control run differs from the demo only in how it trains: the prompt, held-out rows and scoring agree.
    demo, sft = (load_recipe(REPO / "recipes" / name) for name in ("smollm2-arithmetic.yaml", "smollm2-arithmetic-sft.yaml"))
    assert (sft.data.system_prompt, sft.data.template, sft.data.train, sft.data.eval, sft.data.eval_max_rows) == (
        demo.data.system_prompt, demo.data.template, demo.data.train, demo.data.eval, demo.data.eval_max_rows)
    assert [(r.name, r.weight) for r in sft.rewards] == [(r.name, r.weight) for r in demo.rewards]


def test_seed_table_recipe_values():
    r = load_recipe(REPO / "recipes" / "qwen3-0.6b-base-gsm8k.yaml")
    t = r.train
    assert (r.data.template, t.learning_rate, t.beta, t.num_generations, t.max_completion_length) == (
        "plain_en", 3e-6, 0.04, 8, 1024)
    assert (t.lr_scheduler_type, t.warmup_ratio, t.per_device_train_batch_size, t.gradient_accumulation_steps) == (
        "cosine", 0.03, 2, 8)
    r4 = load_recipe(REPO / "recipes" / "qwen3-4b-gsm8k-lora.yaml")
    assert r4.model.lora and r4.model.enable_thinking is True and r4.train.learning_rate == 2e-6
    assert (r4.train.beta, r4.train.temperature, r4.train.max_completion_length) == (0.01, 0.9, 2048)


def test_a_folder_that_is_not_a_model_is_reported(tmp_path, embedded_model_dir):
    # (folder contents, expected message): an empty folder, then config.json without tokenizer files.
    folder = tmp_path / "m"
    folder.mkdir()
    cases = [((), "no config.json"), (("config.json",), "no tokenizer files")]
    for files, expected in cases:
        for f in files:
            shutil.copy(embedded_model_dir / f, folder / f)
        with pytest.raises(GrpokitError) as exc:
            load_recipe(write(tmp_path, patch({"model.name": str(folder)})))
        assert expected in exc.value.render() and "model.name" in exc.value.render()


def test_a_local_model_folder_loads_at_check_time(tmp_path, tiny_model_dir):
    assert load_recipe(write(tmp_path, patch({"model.name": str(tiny_model_dir)}))).notes == []


def test_hub_id_offline_is_skipped_with_a_note(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    recipe = load_recipe(write(tmp_path, patch({"model.name": "nosuch-org/nosuch-model"})))
    assert any("not checked on the hub (HF_HUB_OFFLINE is set)" in n for n in recipe.notes), recipe.notes


def test_hub_id_while_the_hub_is_unreachable_is_a_note_not_a_wait(tmp_path, monkeypatch):
    # A real unreachable endpoint (a closed local port): one probe finds it, offline mode follows, the recipe
    # is checked as far as it can be and says what it could not check (issue 27: carry on, do not wait).
    from huggingface_hub import constants

    from grpokit import hub_access

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setattr(hub_access, "_HUB_STATE", {})
    recipe = load_recipe(write(tmp_path, patch({"model.name": "nosuch-org/nosuch-model"})))
    assert any("not checked on the hub (hub 127.0.0.1:9 unreachable" in n for n in recipe.notes), recipe.notes
    assert constants.HF_HUB_OFFLINE is True  # later hub calls read the cache at once instead of retrying


def test_a_missing_tracker_package_is_named(tmp_path):
    import importlib.util

    if importlib.util.find_spec("wandb") is not None:
        pytest.skip("wandb is installed here")
    with pytest.raises(GrpokitError, match="tracker 'wandb' is not installed"):
        load_recipe(write(tmp_path, patch({"trl": {"report_to": ["wandb"]}})))


def test_qlora_without_bitsandbytes_is_named(tmp_path):
    import importlib.util

    if importlib.util.find_spec("bitsandbytes") is not None:
        pytest.skip("bitsandbytes is installed here")
    update = {"model.init_kwargs": {"quantization_config": {"load_in_4bit": True}}, "model.lora": {"r": 8}}
    with pytest.raises(GrpokitError, match="needs bitsandbytes"):
        load_recipe(write(tmp_path, patch(update)))


def test_trl_fields_reach_the_grpo_config(tmp_path):
    from grpokit.recipe.trl_args import grpo_args

    trl = {"epsilon_high": 0.28, "mask_truncated_completions": True, "num_iterations": 2, "report_to": ["tensorboard"],
           "top_entropy_quantile": 0.2, "generation_batch_size": 16}
    update = {"trl": trl, "model.init_kwargs": {"attn_implementation": "sdpa"}}
    recipe = load_recipe(write(tmp_path, patch(update)))
    args = grpo_args(recipe, tmp_path / "run")
    for key, value in trl.items():
        assert getattr(args, key) == value, key
    assert args.learning_rate == recipe.train.learning_rate  # train.* still set from the recipe
    assert args.model_init_kwargs == {"attn_implementation": "sdpa"}  # the reference model loads like the policy


@pytest.mark.parametrize("setting, dtype, cuda, expected", [
    ("auto", "auto", False, False),       # a CPU: float32, whatever its instructions (measured: docs)
    ("auto", "auto", True, True),         # a GPU with bf16: autocast, as before train.bf16 existed
    ("auto", "float32", True, False),     # the recipe asked for float32
    (True, "float32", False, True),       # an explicit choice wins on any machine
    (False, "auto", True, False),
])
def test_train_bf16_resolves_per_device(tmp_path, monkeypatch, setting, dtype, cuda, expected):
    import torch

    from grpokit.recipe.trl_args import bf16_of

    recipe = load_recipe(write(tmp_path, patch({"train.bf16": setting, "model.dtype": dtype})))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)  # after loading: the checks would use the GPU
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: cuda)
    assert bf16_of(recipe) is expected


def test_train_bf16_true_reaches_the_grpo_config_on_the_cpu(tmp_path):
    from grpokit.recipe.trl_args import grpo_args

    recipe = load_recipe(write(tmp_path, patch({"train.bf16": True})))
    assert grpo_args(recipe, tmp_path / "run").bf16 is True
    assert grpo_args(load_recipe(write(tmp_path, patch({}))), tmp_path / "run").bf16 is False


def test_trl_bf16_is_refused_for_train_bf16(tmp_path):
    with pytest.raises(GrpokitError) as e:
        load_recipe(write(tmp_path, patch({"trl": {"bf16": True}})))
    assert "set train.bf16 instead" in str(e.value)


# (id, recipe text, expected where, expected message): problems found while reading the file itself.
FILE_CASES = [
    ("duplicate section", "data:\n  train: builtin:arithmetic/train.jsonl\nrewards:\n  - name: format\n"
     "train:\n  max_steps: 5\ntrain:\n  learning_rate: 1e-5\n", "recipe.yaml:7 train", "duplicate key 'train' (first at line 5)"),
    ("duplicate nested key", "data:\n  train: builtin:arithmetic/train.jsonl\n  train: x.jsonl\nrewards:\n  - name: format\n",
     "recipe.yaml:3 train", "duplicate key 'train' (first at line 2)"),
    ("binary file", b"\x89PNG\r\n\x1a\n\x00\xff\xfe", "recipe.yaml:1", "not a UTF-8 text file (byte 0x89 at offset 0)"),
    ("latin-1 text", "model:\n  name: caf\u00e9\n".encode("latin-1"), "recipe.yaml:2", "not a UTF-8 text file"),
]


@pytest.mark.parametrize("text,where,message", [c[1:] for c in FILE_CASES], ids=[c[0] for c in FILE_CASES])
def test_recipe_file_problems(tmp_path, text, where, message):
    p = tmp_path / "recipe.yaml"
    p.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(GrpokitError) as exc:
        load_recipe(p)
    assert any(where in pr.where and message in pr.message for pr in exc.value.problems), exc.value.render()


def test_yaml_merge_keys_are_not_duplicates(tmp_path):
    text = ("base: &b {num_generations: 4, per_device_train_batch_size: 8}\n"
            "data:\n  train: builtin:arithmetic/train.jsonl\nrewards:\n  - name: format\n"
            "train:\n  <<: *b\n  num_generations: 2\n")
    with pytest.raises(GrpokitError) as exc:  # only the stray `base` key is wrong, not the override of a merge
        load_recipe(write(tmp_path, text))
    assert [p.where.split()[-1] for p in exc.value.problems] == ["base"]


# (id, --set assignment, expected substring of the problem)
SET_CASES = [
    ("value that is not YAML", "train.max_steps=[", "not valid YAML"),
    ("no equals sign", "train.max_steps", "expected section.key=value"),
    ("empty key part", "train..max_steps=3", "not a dotted key path"),
    ("list index out of range", "rewards.5.weight=2", "not one of its indexes"),
]


@pytest.mark.parametrize("assignment,expected", [c[1:] for c in SET_CASES], ids=[c[0] for c in SET_CASES])
def test_bad_set_is_a_problem_not_a_traceback(tmp_path, assignment, expected, capsys):
    path = write(tmp_path, GOOD)
    assert main(["recipe", "check", str(path), "--set", assignment]) == 2
    err = capsys.readouterr().err
    assert f"--set {assignment}" in err and expected in err and "Traceback" not in err


def test_set_reaches_list_items(tmp_path):
    assert load_recipe(write(tmp_path, GOOD), ["rewards.0.weight=2"]).rewards[0].weight == 2


def test_every_recipe_section_is_a_section():
    """One rule for all sections (unknown keys refused, assignments validated, inf/nan refused): the base class."""
    import typing

    from pydantic import BaseModel

    from grpokit.recipe import Recipe, Section

    def models(annotation):
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            yield annotation
        for a in typing.get_args(annotation):
            yield from models(a)

    seen, todo = set(), [Recipe]
    while todo:
        m = todo.pop()
        if m in seen:
            continue
        seen.add(m)
        assert issubclass(m, Section), m.__name__
        todo += [n for f in m.model_fields.values() for n in models(f.annotation)]
    assert len(seen) >= 12  # model, lora, data, rewards, env, train, health, actions, preflight, generation, ...


@pytest.mark.parametrize("assignment, where, fix", [
    # the file's own line (max_steps in the recipe) no longer holds the value: the flag is what to correct
    ("train.max_steps=abc", "--set train.max_steps", "give train.max_steps a value of the right type"),
    ("rewards.0.weight=heavy", "--set rewards.0.weight", "right type"),
    ("train.lr=1e-5", "--set train.lr", "did you mean 'learning_rate'?"),
    ("train.epochs=2", "--set train.epochs", "did you mean 'num_train_epochs'?"),
    ("train.num_genrations=4", "--set train.num_genrations", "did you mean 'num_generations'?"),
    # a whole section replaced: the flag, and the field inside it
    ("train={max_steps: -5}", "--set train (train.max_steps)", "train.max_steps"),
])
def test_set_problems_name_the_flag_not_the_file_line(tmp_path, assignment, where, fix):
    path = write(tmp_path, GOOD)
    with pytest.raises(GrpokitError) as exc:
        load_recipe(path, [assignment])
    (problem,) = exc.value.problems
    assert problem.where == where and fix in problem.fix and "recipe.yaml:" not in problem.where


def test_a_problem_outside_the_set_keys_keeps_the_file_line(tmp_path):
    path = write(tmp_path, patch({"train.num_generations": 0}))
    with pytest.raises(GrpokitError) as exc:
        load_recipe(path, ["train.max_steps=3"])
    assert [p.where for p in exc.value.problems] == [f"{path}:10 train.num_generations"]


@pytest.mark.parametrize("key, expected", [
    ("lr", "learning_rate"), ("learning_rat", "learning_rate"), ("epochs", "num_train_epochs"),
    ("temp", "temperature"), ("xyz", None),
])
def test_closest_key(key, expected):
    from grpokit.recipe.load import closest_key
    from grpokit.recipe.schema import TrainConfig

    assert closest_key(key, list(TrainConfig.model_fields)) == expected
