"""How training samples: TRL's HF generation call answered by grpokit's decoding loop, on the policy or on a copy
of it in another precision.

    train: {shared_prefix: true}                                          # the default
    generation: {sampler_dtype: bfloat16, sampler_correction: bypass}     # or same (default), auto, float32

TRL 1.16's HF path calls `model.generate(input_ids, attention_mask, generation_config)` with every prompt repeated
once per completion. A trainer's sampling part (`Sampling`, grpokit.training.trainer: step 1 of a batch) chooses
what answers that call when the trainer is built, and says it in the run's first lines:

- **grpokit's decoding loop** (grpokit.generation.decode), when train.shared_prefix is on and the model can take
  the tree (grpokit.generation.tree.refusal): each distinct prompt prefix prefilled once, finished rows out of
  the batch, the same tokens `generate` draws for the seed (the sampling warpers of grpokit.generation.sampling,
  top_p over `generation.top_p_candidates`). A call whose generation settings the loop does not read (a user's
  `trl.generation_kwargs` with beam search, n-gram bans, ...) goes to `generate` as it is, said once.
- **transformers' `generate`** otherwise (train.shared_prefix: false, a static cache or compile asked for, a model
  the tree cannot be exact on), through grpokit's exact top-p warpers when top_p < 1 (generation_internals.NEUTRAL_SAMPLING
  switches transformers' own off).

A sampler in another precision: sampling is half of a CPU step and bfloat16 roughly halves its arithmetic, but a
bf16 copy's log-probs are not the float32 trainer's (docs/measurements.md "Generation choices on the CPU"), and
TRL corrects that gap only when vLLM samples. `SamplerCopy` is the policy's weights cast to the sampler's dtype
(buffers such as rotary frequencies stay as they are), refreshed from the trained weights before each generation
whose optimizer step moved: after every step, after a rollback (a new trainer builds a new copy) and on resume
(the first refresh copies every weight, later ones only the trainable ones, the LoRA adapter for LoRA). It
samples the same way and records each drawn token's log-prob from its raw logits / temperature; TRL carries them
in the batch as `sampling_per_token_logps`, and grpokit.training.sampler corrects the loss with them.

Not covered: sharded models with a copy (FSDP / ZeRO-3: the copy would gather every weight; refused), the
continuous and vLLM backends (TRL's own calls; they sample in their own precision).
"""
from __future__ import annotations

import copy

import torch

from grpokit import generation_internals, hf_internals
from grpokit.errors import GrpokitError, Problem
from grpokit.generation import SampledLogprobs, warpers
from grpokit.generation.decode import Decoding, answer_generate, replacing_generate
from grpokit.generation.tree import TreeCost, refusal
from grpokit.recipe import sampler_dtype_of

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


class SamplerCopy:
    """The policy's weights in the sampler's dtype; see the module docstring. A LoRA policy whose only trained
    weights are its adapters is copied *merged* (`merged`): a plain model whose adapted weights are base + B A x
    scale, recomputed at each refresh, so decoding runs no adapter matmuls (TRL merges adapters for vLLM the
    same way)."""

    def __init__(self, policy, dtype: torch.dtype):
        self.dtype = dtype
        self.adapted = merged_layers(policy)  # (the policy's LoRA module, its name in the merged copy), or None
        self.model = copy.deepcopy(policy)
        if self.adapted is not None:
            self.model = self.model.merge_and_unload()
        generation_internals.drop_foreign_forwards(self.model)  # TRL's fused-head forward still calls the policy's
        self.model.eval()
        for p in self.model.parameters():
            p.requires_grad_(False)
            p.data = p.data.to(dtype)
        if self.adapted is not None:
            weights = dict(self.model.named_modules())
            self.adapted = [(module, weights[name].weight) for module, name in self.adapted]
        self.synced_step: int | None = None  # None: not yet copied from the trained weights
        self.refreshes = 0
        self.pending = None  # the last call's recorded log-probs: (rows, tokens) tensor, or one list per row

    @property
    def merged(self) -> bool:
        return self.adapted is not None

    def refresh(self, policy, step: int) -> None:
        """Copy the trained weights (cast; merged for LoRA) when the optimizer step moved since the last copy."""
        if step == self.synced_step:
            return
        with torch.no_grad():
            if self.adapted is not None:
                for module, weight in self.adapted:
                    adapter = module.active_adapters[0]
                    weight.copy_(module.base_layer.weight + module.get_delta_weight(adapter))
            else:
                for (name, mine), (_, theirs) in zip(self.model.named_parameters(), policy.named_parameters(),
                                                     strict=True):
                    if self.synced_step is None or theirs.requires_grad:
                        mine.copy_(theirs)
        self.synced_step = step
        self.refreshes += 1

    def generate(self, trainer, *args, **kwargs):
        """The policy's `generate` call made on the copy, recording the drawn tokens' log-probs."""
        self.refresh(trainer.model, trainer.state.global_step)
        recorder = SampledLogprobs(trainer.args.temperature)
        kwargs["logits_processor"] = [recorder, *(kwargs.get("logits_processor") or [])]
        with torch.no_grad():
            out = self.model.generate(*args, **kwargs)
        sequences = out if isinstance(out, torch.Tensor) else out.sequences
        self.pending = recorder.finish(sequences)
        return out

    def take_logprobs(self, completion_ids: list[list[int]]) -> list[list[float]] | None:
        """The recorded log-probs of the last generate call, cut to each completion as TRL cut it (after EOS)."""
        pending, self.pending = self.pending, None
        if pending is None or len(pending) != len(completion_ids):
            return None
        rows = pending.cpu().tolist() if isinstance(pending, torch.Tensor) else pending
        return [list(row[:len(ids)]) for row, ids in zip(rows, completion_ids)]


def merged_layers(policy) -> list[tuple] | None:
    """For a LoRA policy whose trained weights are all LoRA adapters of linear layers: each adapted module with its
    name in the merged model (peft's names without the PeftModel prefix); None for anything else (full fine-tuning,
    trained modules_to_save, several active adapters, other adapter kinds), which is copied as it is."""
    if not hasattr(policy, "merge_and_unload") or not hasattr(policy, "get_base_model"):
        return None
    prefix = "base_model.model."
    adapted, covered = [], set()
    for name, module in policy.named_modules():
        if hasattr(module, "get_delta_weight") and hasattr(module, "base_layer") and name.startswith(prefix):
            if len(getattr(module, "active_adapters", [])) != 1 or not hasattr(module.base_layer, "weight"):
                return None
            adapted.append((module, name[len(prefix):]))
            covered |= {id(p) for p in module.parameters()}
    trained = [p for p in policy.parameters() if p.requires_grad]
    if not adapted or any(id(p) not in covered for p in trained):
        return None
    return adapted


def sampler_for(trainer, generation, policy_dtype: str, log) -> SamplerCopy | None:
    """The trainer's sampler copy for generation.sampler_dtype (None: the policy samples itself), said in one line."""
    chosen, why = sampler_dtype_of(generation, policy_dtype)
    merge = generation.sampler_dtype != "same" and merged_layers(trainer.model) is not None
    if chosen == policy_dtype and not merge:  # said on every run too: the precision a run sampled in is never left to guess
        log(f"sampling in {chosen}: {why}")
        return None
    if getattr(trainer.model, "hf_quantizer", None) is not None:
        raise GrpokitError([Problem("generation.sampler_dtype", f"{chosen}: the policy's base weights are quantized "
                                    "(model.init_kwargs.quantization_config); a cast copy of them is no sampler",
                                    "set generation.sampler_dtype: same for a QLoRA recipe")])
    if hf_internals.reference_is_sharded(trainer):
        raise GrpokitError([Problem("generation.sampler_dtype", f"{chosen}: the policy's weights are sharded (FSDP / "
                                    "ZeRO-3), and a whole copy of them would gather every weight on each process",
                                    "set generation.sampler_dtype: same, or train without weight sharding")])
    sampler = SamplerCopy(trainer.model, DTYPES[chosen])
    merged = " from a copy with the LoRA adapter merged in (no adapter matmuls while decoding)" if merge else ""
    log(f"sampling in {chosen}{merged} (the trainer in {policy_dtype}), corrected by "
        f"{generation.sampler_correction}: {why}")
    return sampler


class TrainingGeneration:
    """What TRL's HF generation call runs instead of the policy's `generate` (generation_internals.generate_through): grpokit's
    decoding loop when `tree` (the module docstring), else `generate` with the fast top-p `processors`; on the
    sampler's copy when there is one."""

    def __init__(self, trainer, sampler: SamplerCopy | None, tree: bool, candidates: int, processors, log,
                 draw: str = "vocabulary", compile: bool = False):
        self.trainer, self.sampler, self.tree = trainer, sampler, tree
        self.candidates, self.processors, self.log = candidates, processors, log
        self.draw, self.compile = draw, compile  # the recipe's generation.draw / generation.compile (the loop's)
        self.refused: str | None = None  # the settings the loop could not read, said once
        self._cost: TreeCost | None = None

    def __call__(self, generate, *args, **kwargs):
        config = kwargs.get("generation_config")
        decoding = Decoding.from_generation_config(config, self.candidates, self.sampler is not None, self.draw,
                                                   self.compile) \
            if self.tree and config is not None and not args else "not called as TRL calls it"
        if isinstance(decoding, str):
            if self.tree and self.refused is None:
                self.refused = decoding
                self.log(f"sampling: transformers' generate for this call: {decoding}")
            return self._generate(generate, *args, **kwargs)
        model = self.trainer.model
        if self.sampler is not None:
            self.sampler.refresh(model, self.trainer.state.global_step)
            model = self.sampler.model
        self._cost = self._cost or TreeCost.of(model)
        out, done = answer_generate(model, kwargs["input_ids"], kwargs["attention_mask"], decoding, self._cost)
        if self.sampler is not None:
            self.sampler.pending = done.logprobs
        return out

    def _generate(self, generate, *args, **kwargs):
        """transformers' generate, through grpokit's warpers when they replace transformers' own (NEUTRAL)."""
        if self.processors is not None and not self.tree:
            kwargs.setdefault("logits_processor", self.processors)
        if self.sampler is not None:
            return self.sampler.generate(self.trainer, *args, **kwargs)
        return generate(*args, **kwargs)


class Sampling:
    """The sampling part of a training trainer: a recipe's generation and train sections turned into what answers
    TRL's generate call (the module docstring). The route is decided once, before TRL builds its generation config:
    where transformers' generate answers through grpokit's exact top-p warpers, its own warpers must be off in that
    config, so `generation_kwargs` (which the factory calls before building the trainer) decides and keeps the
    route, and `attach` carries it out on the built trainer. A trainer built without `generation_kwargs` (not by
    grpokit.training.factory) is decided on at `attach`, and refused there if transformers' warpers are still on."""

    def __init__(self, generation, train):
        self.generation, self.train = generation, train
        self.decided: tuple[str | None, bool] | None = None  # route(), once, before TRL built its config

    def route(self, model, args) -> tuple[str | None, bool]:
        """Why transformers' generate answers TRL's call rather than grpokit's decoding loop (None: the loop does),
        and whether grpokit's exact top-p warpers take the place of transformers' own there."""
        g, t = self.generation, self.train
        longest = (t.max_prompt_length or 0) + t.max_completion_length
        why = "train.shared_prefix: false" if not t.shared_prefix else \
            "generation.cache: static" if g.cache != "dynamic" else refusal(model, longest or None)
        return why, bool(g.top_p_candidates) and args.top_p < 1.0

    def generation_kwargs(self, model, args) -> dict | None:
        """GRPOConfig.generation_kwargs for a trainer of `model` this part samples for: the recipe's, with
        transformers' own sampling warpers off (generation_internals.NEUTRAL_SAMPLING) where grpokit's replace them."""
        if self.generation.backend != "hf":  # TRL's own generation: nothing of grpokit's replaces its warpers
            return args.generation_kwargs
        why, fast_top_p = self.decided = self.route(model, args)
        if why is None or not fast_top_p:
            return args.generation_kwargs
        return {**(args.generation_kwargs or {}), **generation_internals.NEUTRAL_SAMPLING}

    def attach(self, trainer, log) -> TrainingGeneration | None:
        """Decide how this trainer samples and say it; None for the continuous and vLLM backends (TRL's own
        generation)."""
        g, args = self.generation, trainer.args
        if g.backend != "hf":
            return None
        policy_dtype = str(next(trainer.model.parameters()).dtype).removeprefix("torch.")
        sampler = sampler_for(trainer, g, policy_dtype, log)  # before generate is replaced: the copy is plain
        why, fast_top_p = self.decided or self.route(trainer.model, args)
        if g.compile and why is not None:  # transformers' own compiled step; the loop compiles its own (Decoding)
            generation_internals.compile_generation(trainer)
        processors = None
        if why is None:
            nucleus = g.draw == "nucleus" and fast_top_p and args.min_p is None  # Decoding.nucleus, TRL's settings
            draw = "the draw over the nucleus only: the warpers' distribution, its own random stream" if nucleus \
                else "the inverse draw: the warpers' distribution, its own random stream" if g.draw == "inverse" \
                else "transformers' samples for the seed"
            log("sampling: grpokit's decoding loop (each distinct prompt prefix prefilled once, finished rows out of "
                "the batch, " + draw
                + (", the token step compiled" if g.compile else "") + ")")
        else:
            log(f"sampling: transformers' generate: {why}")
            if fast_top_p:  # transformers' own warpers off (generation_kwargs), grpokit's exact top-p in their place
                if not generation_internals.sampling_neutral(trainer):
                    raise GrpokitError([Problem(
                        "sampling", "transformers' own sampling warpers are on in this trainer's generation config, "
                        "so grpokit's exact top-p would be applied twice",
                        "build the trainer with GRPOConfig.generation_kwargs from Sampling.generation_kwargs "
                        "(grpokit.training.factory.grpo_trainer does)")])
                processors = warpers(args.temperature, args.top_k, args.top_p, args.min_p,
                                     candidates=g.top_p_candidates)
        generation = TrainingGeneration(trainer, sampler, why is None, g.top_p_candidates if fast_top_p else 0,
                                        processors, log, g.draw, g.compile)
        generation_internals.generate_through(trainer, generation)
        return generation


class EpisodeSampling:
    """The sampling part of a trainer that plays evaluation episodes (grpokit.evaluation.tools): each prompt
    prefilled once by grpokit's decoding loop (grpokit.generation.decode.replacing_generate), with the model itself."""

    def __init__(self, top_p_candidates: int, draw: str = "vocabulary", compile: bool = False):
        self.top_p_candidates = top_p_candidates
        self.draw, self.compile = draw, compile  # the recipe's generation.draw / generation.compile
        self.sampler = None  # the model samples itself

    def attach(self, trainer, log) -> "EpisodeSampling":
        generation_internals.generate_through(trainer, replacing_generate(trainer.model, self.top_p_candidates, draw=self.draw,
                                                               compile=self.compile))
        return self
