"""Memory planning without loading weights: what one GPU holds for a recipe, per strategy, and a recommendation.

    grpokit preflight recipes/qwen3-4b-gsm8k-lora.yaml --memory
    grpokit preflight RECIPE --memory --num-processes 8 --accelerate-config zero3 --gpu-memory 80

The model is built from its own config on torch's `meta` device (shapes, no storage), so every architecture
is counted exactly: its parameters, its LoRA adapters (peft on the meta model), and the activations autograd
saves in one forward pass (a forward of the meta model with saved-tensor hooks: every tensor kept for the
backward pass, whatever the layer types, MLP width, GQA or adapter dropout). Per GPU, with
P = all parameters, T = trained parameters (P, or the LoRA adapters), b = bytes per weight (float32 4,
bfloat16/float16 2; 'auto' = bfloat16 on a GPU, float32 on the CPU), N = processes (GPUs):

    weights     P x b (+ T x 4 for LoRA: peft keeps adapters in float32)   /N under zero3 and fsdp
    optimizer   AdamW's two moments in the trained weights' dtype, 2 x T x (b, or 4 for adapters), as the
                Trainer keeps them (no master copy); zero2/zero3/fsdp train with a float32 master copy,
                12 bytes per trained parameter (the ZeRO paper's accounting), /N
    reference   P x b when beta > 0 and every weight trains (/N under zero3, fsdp); LoRA: 0 (the base
                model with the adapter switched off is the reference)
    sampler     a copy of the policy in generation.sampler_dtype when it is not the weights' own (P x its
                bytes; grpokit.training.sampling), else 0; LoRA with any sampler_dtype but same: a copy with the
                adapter merged in, P x its bytes even in the weights' own precision
    then the larger of the two phases of a step:
    training    activations of one micro-batch of m sequences of s = prompt + completion tokens, as the meta
                forward saved them (train.shared_prefix: one sequence of (m / G) x prompt + m x completion
                positions, each prompt once, grpokit.generation.tree); with gradient checkpointing each layer's input (L x m x s x hidden x b) plus
                one layer's saved tensors, recomputed in the backward pass. The attention probabilities
                (m x heads x s x s per layer) are counted only on the CPU: CUDA's fused SDPA kernels do not keep
                them, the CPU's masked SDPA does
              + lm_head: TRL 1.16 scores log-probabilities through a fused LM head (trl.kernels.chunked_logprob)
                that never holds the [positions, vocab] logits: it works on tiles of min(positions, 4096) x
                min(vocab, 32768) in the compute dtype (float32 on the CPU), one on CUDA (Triton folds each tile in
                place), HEAD_TILES_CPU on the CPU (its torch fallback makes temporaries), plus, when the
                head's weight trains (full fine-tuning), its float32 gradient accumulator vocab x hidden x 4;
                positions = m x completion with train.shared_prefix or on CUDA, m x s on the CPU in TRL's layout;
                the head's backward runs first and frees its tiles, so the larger of lm_head and
              + gradients T x (b or 4) (/N under zero2, zero3, fsdp), which build up layer by layer after it
    generation  KV cache 2 x L x kv_heads x head_dim x s x g x b for the g = per_device_train_batch_size x
                gradient_accumulation_steps sequences one GPU generates per step (HF generate; TRL's default
                steps_per_generation); gradients are freed before it (the Trainer zeroes them to None)

A model's shape is grpokit.preflight.shape's. Without the training libraries: the decoder families whose layers are known (DECODERS: Llama, Mistral, Qwen2,
Qwen3) are counted from their config.json alone (`shape_from_dict`: parameters by the layer formula, saved
activations by the per-layer table ACTIVATIONS, written from what the meta forward above saves), so the plan
answers in about a second without importing torch, transformers or peft; tests/test_memory.py checks the two
agree on every shipped recipe and on small configs of each family (rerun it after upgrading those libraries).
Any other architecture, or LoRA on a subset of the linear layers, takes the meta forward.

Checked against measured peaks (benchmarks/memory_plan.py writes benchmarks/results/memory_*.json, which
tests/test_memory.py reads; docs/measurements.md "Memory planner against measured peaks"). Not covered: allocator fragmentation and the CUDA context (~1-2 GiB: the
recommendation keeps 15% headroom), DeepSpeed/FSDP communication buffers, the gathered layer under
zero3/fsdp, vLLM's own weight copy and cache (it takes `gpu_memory_utilization` of the GPU when colocated).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, fields

from grpokit.generation.backends import BACKENDS
from grpokit.preflight.shape import ADAPTER_BYTES, Shape, model_shape, weight_bytes
from grpokit.recipe import batch_geometry
from grpokit.recipe.machine import cpu_bf16_flag
from grpokit.run.safety import checkpoints_at_peak

GIB = 1024 ** 3
MASTER_OPTIMIZER_BYTES = 12  # zero2/zero3/fsdp mixed precision: fp32 master copy + two fp32 Adam moments
HEAD_TOKENS, HEAD_VOCAB = 4096, 32768  # TRL 1.16's fused LM head tile: TOKEN_CHUNK_SIZE x _CHUNKED_LOGPROB_CHUNK_SIZE
# Tiles live at once in the backward pass of that head on the CPU, where torch ops fold each tile (Triton, one):
# 6 fits benchmarks/memory_plan.py's measured peaks (docs/measurements.md "Memory planner against measured peaks").
HEAD_TILES_CPU = 6
STRATEGIES = ("ddp", "zero2", "zero3", "fsdp")
SHARDS_STATES = {"zero2", "zero3", "fsdp"}   # gradients + optimizer state split over the GPUs
SHARDS_WEIGHTS = {"zero3", "fsdp"}           # the weights too
HEADROOM = 0.85             # plan to fill at most 85% of a GPU: CUDA context, fragmentation, buffers
GPU_SIZES_GIB = (24, 40, 80, 141)  # common cards: 24 GB consumer, A100 40/80 GB, H200 141 GB
@dataclass
class Plan:
    """Bytes one GPU holds for a recipe under one layout."""

    strategy: str
    num_gpus: int
    gradient_checkpointing: bool
    weights: int
    optimizer: int
    reference: int
    sampler: int
    gradients: int
    activations: int
    lm_head: int
    kv_cache: int

    @property
    def total(self) -> int:
        # The head's backward runs first and frees its tiles before the layers' gradients build up.
        step = self.activations + max(self.lm_head, self.gradients)
        return self.weights + self.optimizer + self.reference + self.sampler + max(step, self.kv_cache)


def sampler_bytes_per_weight(sampler_dtype: str, weight_b: int, device: str) -> int:
    """Bytes per weight of a sampler copy (generation.sampler_dtype against the weights' `weight_b`), 0: no copy.
    auto is bf16 on a GPU and on a CPU with native bf16 (read from its flags, no library imported)."""
    if sampler_dtype == "auto":
        sampler_dtype = "bfloat16" if device == "cuda" or cpu_bf16_flag() else "same"
    want = {"float32": 4, "bfloat16": 2}.get(sampler_dtype, weight_b)
    return 0 if want == weight_b else want


def _sampler_bytes(sampler_dtype: str, weight_b: int, device: str, lora: bool) -> int:
    """Bytes per weight of the sampler copy: another precision's; a LoRA policy's merged copy even in its own."""
    copy_b = sampler_bytes_per_weight(sampler_dtype, weight_b, device)
    return copy_b or (weight_b if lora and sampler_dtype != "same" else 0)


def plan(shape: Shape, *, strategy: str, num_gpus: int, dtype: str, beta: float, micro_batch: int,
         generation_batch: int, prompt_len: int, completion_len: int, gradient_checkpointing: bool,
         device: str = "cuda", sampler_dtype: str = "same", generations: int | None = None) -> Plan:
    """Per-GPU bytes by the rules in the module docstring (`device`: where it trains, cuda or cpu; `generations`:
    the group size when the loss computes the tree of shared prefixes, train.shared_prefix, else None)."""
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}")
    b = weight_bytes(dtype, device)
    n = max(1, num_gpus)
    lora = shape.lora_params is not None
    trained = shape.lora_params if lora else shape.params
    tb = ADAPTER_BYTES if lora else b  # bytes per trained weight
    w_div = n if strategy in SHARDS_WEIGHTS else 1
    s_div = n if strategy in SHARDS_STATES else 1
    opt_per_param = MASTER_OPTIMIZER_BYTES if strategy in SHARDS_STATES else 2 * tb
    s = prompt_len + completion_len
    # TRL's layout: micro_batch sequences of s; the tree: one sequence holding each prompt once (grpokit.generation.tree)
    seq, sequences = (s, micro_batch) if generations is None else (tree_positions(micro_batch, generations, prompt_len,
                                                                                   completion_len), 1)
    per_seq = (shape.act_per_token * seq + (shape.act_per_token_sq * seq * seq if device != "cuda" else 0.0)) \
        * b / shape.act_dtype_bytes  # measured at the shape's dtype
    if gradient_checkpointing:
        acts = shape.layers * seq * shape.hidden * b + per_seq / max(1, shape.layers)
    else:
        acts = per_seq
    positions = micro_batch * (s if device != "cuda" and generations is None else completion_len)
    compute = b if device == "cuda" else 4  # the head's tiles: autocast dtype on a GPU, float32 on the CPU
    tile = min(positions, HEAD_TOKENS) * min(shape.vocab, HEAD_VOCAB) * compute
    head = tile * (1 if device == "cuda" else HEAD_TILES_CPU) + positions * shape.hidden * 4  # + grad of the hidden
    if not lora:
        head += shape.vocab * shape.hidden * 4  # the head weight's float32 gradient accumulator
    return Plan(
        strategy=strategy, num_gpus=n, gradient_checkpointing=gradient_checkpointing,
        weights=(shape.params * b + (trained * tb if lora else 0)) // w_div,
        optimizer=trained * opt_per_param // s_div,
        reference=0 if (lora or beta <= 0) else shape.params * b // w_div,
        sampler=shape.params * _sampler_bytes(sampler_dtype, b, device, lora),
        gradients=trained * tb // s_div,
        activations=int(sequences * acts),
        lm_head=head,
        kv_cache=2 * shape.layers * shape.kv_heads * shape.head_dim * s * generation_batch * b,
    )


def tree_positions(micro_batch: int, generations: int, prompt_len: int, completion_len: int) -> int:
    """Positions of one micro-batch's tree: each prompt once, every completion, an anchor per further completion."""
    prompts = max(1, micro_batch // max(1, generations))
    return prompts * prompt_len + micro_batch * completion_len + (micro_batch - prompts)


def plan_recipe(recipe, shape: Shape, strategy: str, num_gpus: int, gradient_checkpointing: bool | None = None,
                device: str = "cuda") -> Plan:
    """The plan of `recipe` (model.gradient_checkpointing auto: planned off, what auto tries first)."""
    t = recipe.train
    gc = recipe.model.gradient_checkpointing is True if gradient_checkpointing is None else gradient_checkpointing
    return plan(shape, strategy=strategy, num_gpus=num_gpus, dtype=recipe.model.dtype, beta=t.beta,
                micro_batch=t.per_device_train_batch_size,
                generation_batch=batch_geometry(t, recipe.trl, num_gpus).per_process,
                prompt_len=t.max_prompt_length or 512, completion_len=t.max_completion_length,
                gradient_checkpointing=gc, device=device,
                sampler_dtype=recipe.generation.sampler_dtype if recipe.generation.backend == "hf" else "same",
                generations=t.num_generations if t.shared_prefix else None)


def device_memory(device: str) -> tuple[int, str]:
    """(bytes, what they are) of the memory one training process may fill now: the first GPU's free memory, or
    the RAM the kernel says is available (MemAvailable). Free, not total: the machine may be shared, and an SFT
    of the embedded model planned to fit the total RAM without checkpointing was killed by the kernel's OOM killer
    beside a test run (docs/measurements.md "Tool calling: SFT warm start, then GRPO")."""
    if device == "cuda":
        import torch

        return torch.cuda.mem_get_info(0)[0], "GPU memory free"
    try:
        with open("/proc/meminfo") as f:
            kib = next(int(line.split()[1]) for line in f if line.startswith("MemAvailable:"))
        return kib * 1024, "RAM available"
    except (OSError, StopIteration, ValueError):  # not Linux: the machine's RAM
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"), "RAM"


def checkpointing_of(recipe, device: str, num_gpus: int = 1, memory: tuple[int, str] | None = None) -> tuple[bool, str]:
    """model.gradient_checkpointing resolved for this device (on or off, and why, in one line): a recipe's own
    true/false as it is; auto on only where the plan without it does not fit HEADROOM of the device's memory
    (`memory`: (bytes, what), default `device_memory`), checkpointing costing step time where it is not needed.
    Several processes are planned as DDP (each holds the whole model)."""
    chosen = recipe.model.gradient_checkpointing
    if chosen != "auto":
        return chosen, f"model.gradient_checkpointing: {str(chosen).lower()}"
    shape, _ = model_shape(recipe.model.name, recipe.model.lora, recipe.model.dtype, device)
    need = plan_recipe(recipe, shape, "ddp", num_gpus, False, device).total
    have, what = memory or device_memory(device)
    on = need > have * HEADROOM
    return on, (f"model.gradient_checkpointing: auto; the memory plan without it, {need / GIB:.1f} GiB, "
                f"{'does not fit' if on else 'fits'} {HEADROOM:.0%} of the {have / GIB:.1f} GiB {what} on this {device}")


def checkpoint_bytes(shape: Shape, dtype: str, device: str = "cuda") -> int:
    """One checkpoint on disk: the weights in their dtype (the LoRA adapter alone, in float32) and AdamW's two
    moments of the trained ones (the Trainer saves optimizer.pt so that --resume continues exactly)."""
    b = weight_bytes(dtype, device)
    if shape.lora_params is not None:
        return shape.lora_params * ADAPTER_BYTES * 3
    return shape.params * b * 3


def vllm_share(recipe) -> float:
    """The share of each GPU the generation backend keeps beside training: a colocated vLLM engine's
    generation.gpu_memory_utilization (its row of grpokit.generation.backends)."""
    g = recipe.generation
    return BACKENDS[g.backend].gpu_share(g)


def recommend(recipe, shape: Shape, gpu_gib: float | None = None) -> str:
    """The simplest layout that fits: fewest GPUs, then DDP before ZeRO-2 before ZeRO-3, checkpointing last. A
    colocated vLLM engine's share of each GPU is left to it."""
    sizes = (gpu_gib,) if gpu_gib else GPU_SIZES_GIB
    for size in sizes:
        for n in (1, 2, 4, 8):
            for strategy in ("ddp", "zero2", "zero3") if n > 1 else ("ddp",):
                for gc in (False, True):
                    p = plan_recipe(recipe, shape, strategy, n, gc)
                    if p.total <= size * GIB * (HEADROOM - vllm_share(recipe)):
                        how = f"{n} x {size:g} GiB GPU" + ("" if n == 1 else f"s, --num-processes {n} "
                                                          f"--accelerate-config {strategy}")
                        gc_note = " with model.gradient_checkpointing: true" if gc else ""
                        return f"{how}{gc_note} ({p.total / GIB:.1f} GiB per GPU planned)"
    return (f"does not fit 8 x {sizes[-1]:g} GiB GPUs: use LoRA (model.lora), shorter max_completion_length, a "
            "smaller per_device_train_batch_size, or more machines")


def memory_report(recipe, num_gpus: int = 1, strategy: str | None = None, gpu_gib: float | None = None) -> dict:
    shape, note = model_shape(recipe.model.name, recipe.model.lora, recipe.model.dtype)
    strategies = (strategy,) if strategy else (("ddp",) if num_gpus == 1 else STRATEGIES)
    plans = [plan_recipe(recipe, shape, s, num_gpus, gc) for s in strategies for gc in (False, True)]
    return {"model": recipe.model.name, "shape": shape, "plans": plans, "recommendation": recommend(recipe, shape, gpu_gib),
            "notes": [note] if note else []}


def render_memory_plan(report: dict, recipe) -> str:
    sh: Shape = report["shape"]
    t = recipe.train
    lora = f", LoRA r={recipe.model.lora.r}: {sh.lora_params / 1e6:.1f}M trained" if sh.lora_params is not None else ""
    lines = [f"memory plan for {report['model']}: {sh.params / 1e6:.1f}M parameters{lora}, "
             f"{sh.layers} layers, hidden {sh.hidden}, {sh.kv_heads} kv heads x {sh.head_dim}, vocab {sh.vocab}",
             f"dtype {recipe.model.dtype}, beta {t.beta}, micro-batch {t.per_device_train_batch_size}, "
             f"{batch_geometry(t, recipe.trl).per_process} sequences generated per GPU per step "
             f"of {(t.max_prompt_length or 512)} + {t.max_completion_length} tokens",
             "GiB per GPU:"]
    cols = [f.name for f in fields(Plan) if f.name not in ("strategy", "num_gpus", "gradient_checkpointing")]
    lines.append(f"  {'layout':<22}" + "".join(f"{c:>12}" for c in cols) + f"{'total':>10}")
    for p in report["plans"]:
        name = f"{p.strategy} x{p.num_gpus}{' +ckpt' if p.gradient_checkpointing else ''}"
        lines.append(f"  {name:<22}" + "".join(f"{getattr(p, c) / GIB:>12.2f}" for c in cols) + f"{p.total / GIB:>10.2f}")
    lines.append("total = weights + optimizer + reference + sampler + the larger of a step's training (activations + "
                 "the larger of lm_head and gradients) and its generation (kv_cache)")
    if vllm_share(recipe):
        lines.append(f"plus the colocated vLLM engine's {vllm_share(recipe):.0%} of each GPU (its weights and KV cache; "
                     "generation.gpu_memory_utilization), which the recommendation leaves to it")
    lines.append(f"recommendation: {report['recommendation']}")
    lines.append(checkpoint_line(sh, recipe))
    return "\n".join(lines)


def checkpoint_line(shape: Shape, recipe, device: str = "cuda") -> str:
    """The disk a run's checkpoints take (train refuses to start when the disk cannot hold them)."""
    each, peak = checkpoint_bytes(shape, recipe.model.dtype, device), checkpoints_at_peak(recipe.train)
    kept = (f", up to {peak} on disk at once (train.save_total_limit {recipe.train.save_total_limit}, save_steps "
            f"{recipe.train.save_steps}): {peak * each / 1e9:.1f} GB") if peak else ""
    return f"checkpoints: about {each / 1e9:.2f} GB each (weights + AdamW's two moments){kept}"
