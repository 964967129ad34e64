"""`grpokit train --num-processes`: the accelerate command for each shipped config and layout, --dry-run, bad layouts.

The real two-process run (gloo on CPU, resume, SIGTERM) is in tests/slow/test_multiprocess.py.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

from grpokit.cli import main
from grpokit.errors import GrpokitError
from grpokit.training.launch import (mixed_precision_of, ACCELERATE_CONFIGS, CONFIG_DIR, LaunchOptions,
                                     accelerate_command, check_options, format_command)

REPO = Path(__file__).resolve().parents[1]
RECIPE = str(REPO / "recipes" / "smollm2-arithmetic.yaml")
HEAD = [sys.executable, "-m", "accelerate.commands.launch", "--config_file"]


@pytest.mark.parametrize("opts, precision, expected_tail", [
    # one machine, CPU: the DDP config, gloo through torchrun, no bf16 autocast
    (LaunchOptions(2), "no", [str(CONFIG_DIR / "ddp.yaml"), "--num_processes", "2", "--num_machines", "1",
                              "--machine_rank", "0", "--mixed_precision", "no"]),
    # one machine, 8 GPUs, ZeRO-2 for a bf16 recipe
    (LaunchOptions(8, "zero2"), "bf16", [str(CONFIG_DIR / "zero2.yaml"), "--num_processes", "8", "--num_machines",
                                         "1", "--machine_rank", "0", "--mixed_precision", "bf16"]),
    (LaunchOptions(8, "zero3"), "bf16", [str(CONFIG_DIR / "zero3.yaml"), "--num_processes", "8", "--num_machines",
                                         "1", "--machine_rank", "0", "--mixed_precision", "bf16"]),
    (LaunchOptions(8, "fsdp"), "bf16", [str(CONFIG_DIR / "fsdp.yaml"), "--num_processes", "8", "--num_machines", "1",
                                        "--machine_rank", "0", "--mixed_precision", "bf16"]),
    # two nodes x 8 GPUs, this is node 1: total processes, rank and the main node's address go through
    (LaunchOptions(16, "zero3", 2, 1, "10.0.0.1", 29500), "bf16",
     [str(CONFIG_DIR / "zero3.yaml"), "--num_processes", "16", "--num_machines", "2", "--machine_rank", "1",
      "--main_process_ip", "10.0.0.1", "--main_process_port", "29500", "--mixed_precision", "bf16"]),
    # the user's own accelerate file, by path; a float32 recipe trains without autocast
    (LaunchOptions(4, str(CONFIG_DIR / "ddp.yaml")), "no", [str(CONFIG_DIR / "ddp.yaml"), "--num_processes", "4",
                                                            "--num_machines", "1", "--machine_rank", "0",
                                                            "--mixed_precision", "no"]),
])
def test_accelerate_command(opts, precision, expected_tail):
    cmd = accelerate_command(["r.yaml", "--skip-audit"], opts, mixed_precision=precision)
    assert cmd == HEAD + expected_tail + ["-m", "grpokit", "train", "r.yaml", "--skip-audit"]


@pytest.mark.parametrize("dtype, precision", [("auto", "bf16"), ("bfloat16", "bf16"), ("float32", "no"),
                                              ("float16", "no")])
def test_the_recipes_precision_is_what_training_sets(dtype, precision):
    assert mixed_precision_of(dtype) == precision


@pytest.mark.parametrize("name, distributed_type", [
    ("ddp", "MULTI_GPU"), ("zero2", "DEEPSPEED"), ("zero3", "DEEPSPEED"), ("fsdp", "FSDP"),
])
def test_shipped_configs_are_accelerate_configs(name, distributed_type):
    from accelerate.commands.config.config_args import ClusterConfig

    path = CONFIG_DIR / ACCELERATE_CONFIGS[name][0]
    raw = yaml.safe_load(path.read_text())
    assert raw["distributed_type"] == distributed_type
    assert "TRL" in path.read_text().splitlines()[0]  # the source is named
    cfg = ClusterConfig.from_yaml_file(path)  # accelerate's own reader accepts every key
    assert cfg.distributed_type.value == distributed_type


@pytest.mark.parametrize("opts, where", [
    (LaunchOptions(0), "--num-processes"),                             # no process at all
    (LaunchOptions(3, num_machines=2, main_process_ip="h"), "--num-processes"),  # 3 over 2 machines
    (LaunchOptions(4, num_machines=2, machine_rank=2, main_process_ip="h"), "--machine-rank"),  # ranks 0..1
    (LaunchOptions(4, num_machines=2), "--main-process-ip"),           # other nodes cannot find node 0
    (LaunchOptions(2, "nosuch"), "--accelerate-config nosuch"),        # neither a name nor a file
])
def test_bad_layouts_are_refused(opts, where):
    with pytest.raises(GrpokitError) as e:
        check_options(opts, need_modules=False)
        accelerate_command([], opts, mixed_precision="no")
    assert [p.where for p in e.value.problems] == [where]


def test_dry_run_prints_the_exact_command(capsys, tmp_path):
    out_dir = tmp_path / "run"
    code = main(["train", RECIPE, "--set", "train.max_steps=2", "--set", "selection.refill=false", "--output-dir",
                 str(out_dir), "--overwrite", "--num-processes", "2", "--dry-run"])
    assert code == 0
    # the demo recipe trains float32 weights: no autocast, on this CPU and on GPUs alike
    expected = accelerate_command([RECIPE, "--set", "train.max_steps=2", "--set", "selection.refill=false",
                                   "--output-dir", str(out_dir), "--overwrite",
                                   "--skip-audit"], LaunchOptions(2), mixed_precision="no")
    assert capsys.readouterr().out.strip() == format_command(expected)
    assert not out_dir.exists()  # a dry run writes nothing


def test_dry_run_of_a_resume_and_of_zero3_without_deepspeed(capsys, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    recipe = (REPO / "recipes" / "smollm2-arithmetic.yaml").read_text()
    (run / "config.yaml").write_text(recipe)
    # the dry run shows the ZeRO-3 command even where deepspeed is not installed (it is for the GPU machines)
    assert main(["train", "--resume", str(run), "--num-processes", "8", "--accelerate-config", "zero3", "--dry-run"]) == 0
    out, err = capsys.readouterr()
    assert "zero3.yaml --num_processes 8" in out and out.strip().endswith(f"train --resume {run} --skip-audit")
    import importlib.util

    if importlib.util.find_spec("deepspeed") is None:  # the machine that prints it lacks what the cluster needs
        assert "zero3 needs deepspeed, which is not installed here" in err


def test_a_qwen3_dry_run_prints_the_gpu_precision_on_a_cpu(capsys):
    """A bf16 recipe's command is for the GPU machines: bf16, whatever machine prints it (it printed
    --mixed_precision no on this CPU, so the command copied to the cluster trained without autocast)."""
    recipe = str(REPO / "recipes" / "qwen3-4b-gsm8k-lora.yaml")
    assert main(["train", recipe, "--num-processes", "8", "--accelerate-config", "zero3", "--dry-run"]) == 0
    assert "--mixed_precision bf16" in capsys.readouterr().out


def test_a_one_process_dry_run_prints_what_training_would_use(capsys, tmp_path):
    """`train RECIPE --dry-run` without --num-processes: the GRPOConfig fields that decide the run, as training
    builds them, and the command; the Qwen3-4B weights are not on this machine, so loading them would fail."""
    recipe = str(REPO / "recipes" / "qwen3-4b-gsm8k-lora.yaml")
    assert main(["train", recipe, "--dry-run", "--set", "train.learning_rate=3e-6", "--output-dir",
                 str(tmp_path / "run")]) == 0
    out, err = capsys.readouterr()
    assert out.strip() == f"grpokit train {recipe} --set train.learning_rate=3e-6 --output-dir {tmp_path / 'run'}"
    for expected in ("8 completions per step = 1 prompt(s) x 8 generations", "gradient_accumulation_steps 4 x 1 process",
                     "learning_rate 3e-06, cosine schedule", "beta 0.01 (a reference model", "loss        dapo",
                     "temperature 0.9", "prompt <= 512 tokens, completion <= 2048", "model.dtype bfloat16",
                     "gradient checkpointing on (model.gradient_checkpointing: auto; the memory plan without it,", "LoRA r=16", "generation  hf (grpokit's decoding loop or model.generate)", "layout      ",
                     "1 epoch(s) of data.train", "plan        1 x 24 GiB GPU", f"output      {tmp_path / 'run'}"):
        assert expected in err, expected
    assert not (tmp_path / "run").exists()


def test_a_dry_run_of_several_processes_prints_the_settings_and_the_command(capsys):
    assert main(["train", RECIPE, "--num-processes", "2", "--set", "selection.refill=false", "--set", "train.beta=0.04",
                 "--dry-run"]) == 0
    out, err = capsys.readouterr()
    assert out.strip().startswith(sys.executable) and "--num_processes 2" in out  # stdout: the command alone
    assert "32 completions per step = 4 prompt(s) x 8 generations" in err and "x 2 processes" in err
    assert "beta 0.04 (a reference model" in err and "--mixed_precision no for the GPUs" in err


@pytest.mark.parametrize("config", ["fsdp", "zero3"])
def test_a_sharded_launch_without_cuda_is_refused_not_run_as_ddp(config, capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    assert main(["train", RECIPE, "--num-processes", "2", "--accelerate-config", config, "--skip-audit"]) == 2
    err = capsys.readouterr().err
    assert ("would train plain DDP instead" in err or "needs deepspeed" in err) and "--accelerate-config ddp" in err


SPLIT_GROUPS = ["--set", "train.per_device_train_batch_size=4", "--set", "trl.generation_batch_size=8"]


@pytest.mark.parametrize("argv, message", [
    # refill keeps whole groups per process: 8 completions per step over 2 processes, 4 each, in groups of 8 would
    # span processes; refused before any process starts, a dry run included
    (["--num-processes", "2", "--dry-run", *SPLIT_GROUPS], "selection.refill"),
    (["--num-processes", "2", "--skip-audit", *SPLIT_GROUPS], "selection.refill"),
    (["--num-processes", "2", "--accelerate-config", "zero2"], "deepspeed"),  # real launch needs deepspeed
])
def test_launch_refusals_exit_2(capsys, argv, message):
    import importlib.util

    if message == "deepspeed" and importlib.util.find_spec("deepspeed"):
        pytest.skip("deepspeed is installed here")
    assert main(["train", RECIPE, *argv]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("env, printed", [
    ({}, True),                                                  # one process, no launcher
    ({"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "2"}, True),   # the main process of two
    ({"RANK": "1", "LOCAL_RANK": "1", "WORLD_SIZE": "2"}, False),  # the other one: silent
    ({"RANK": "8", "LOCAL_RANK": "0", "WORLD_SIZE": "16"}, False),  # machine 1's first process is not the main one
    ({"RANK": "x"}, True),                                       # malformed: twice beats never
])
def test_status_lines_print_on_rank_zero_only(capsys, monkeypatch, env, printed):
    import signal

    from grpokit.console import console
    from grpokit.training.callbacks import GracefulStop

    for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE"):
        monkeypatch.delenv(k, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    console.print("training tiny on 24 prompts -> runs/x")
    GracefulStop()._handle(signal.SIGTERM, None)  # the signal reaches every rank; its message is printed once
    out = capsys.readouterr().out
    assert (out.count("training tiny on 24 prompts") == 1 and "SIGTERM: finishing this step" in out) is printed
    assert printed or out == ""


def test_errors_print_on_every_rank(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("RANK", "1")  # a worker that is not the main process still shows why it stopped
    assert main(["train", str(tmp_path / "missing.yaml")]) == 2
    assert "missing.yaml" in capsys.readouterr().err


def test_a_dry_run_without_the_models_config_still_answers(monkeypatch):
    # The plan needs the model's config.json; a hub model not on this machine (offline) gets a line saying so.
    from grpokit.recipe import validate_raw
    from grpokit.training.launch import resolved_settings

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    recipe = validate_raw({"model": {"name": "nosuch-org/nosuch-model"}, "data": {"train": "builtin:arithmetic/train.jsonl"},
                           "rewards": [{"name": "math_correctness"}],
                           "generation": {"sampler_dtype": "bfloat16"}}, "t.yaml", use="plan")
    lines = resolved_settings(recipe)
    (plan,) = [line for line in lines if line.strip().startswith("plan ")]
    assert "none here: its config.json is not on this machine" in plan  # (was an AttributeError)
    assert any("sampler bfloat16, corrected by bypass" in line for line in lines)


@pytest.mark.parametrize("train, trl", [
    ({"per_device_train_batch_size": 8, "num_generations": 4}, {}),
    ({"per_device_train_batch_size": 4, "gradient_accumulation_steps": 2, "num_generations": 4}, {}),
    ({"per_device_train_batch_size": 4, "gradient_accumulation_steps": 2, "num_generations": 4},
     {"steps_per_generation": 4}),  # one generation round serves two optimizer steps
    ({"per_device_train_batch_size": 4, "num_generations": 4}, {"generation_batch_size": 16}),
])
def test_the_batch_geometry_is_what_trls_grpoconfig_derives(train, trl, tmp_path):
    # Every caller (recipe check, a launch's refill check, --dry-run, the memory plan) reads batch_geometry: here it
    # is checked against TRL's own arithmetic, the GRPOConfig training builds (one process, as on this machine).
    from grpokit.recipe import batch_geometry, grpo_args, validate_raw

    recipe = validate_raw({"data": {"train": "builtin:arithmetic/train.jsonl"}, "rewards": [{"name": "format"}],
                           "train": train, "trl": trl})
    args, g = grpo_args(recipe, tmp_path), batch_geometry(recipe.train, recipe.trl)
    assert (g.generation_batch, g.steps_per_generation) == (args.generation_batch_size, args.steps_per_generation)
    assert g.step_completions == args.per_device_train_batch_size * args.gradient_accumulation_steps
    assert g.prompts_per_round == args.generation_batch_size // args.num_generations
