"""grpokit's decoding loop: each distinct prompt prefix computed once, finished rows out of the batch, and the same
tokens transformers' `generate` draws for the same seed.

    decoding = Decoding(max_new_tokens=48, stop_ids=(2,), pad_id=2, temperature=0.7, top_p=0.9)
    done = decode(model, prompt_ids, decoding)      # prompt_ids: one list per row (a group's prompt repeated)
    done.ids[i]                                      # row i's generated ids, up to and including its stop id

Why not `model.generate`: transformers' `generate` prefills every row's prompt (8 times for a group of 8) and keeps
decoding rows that have finished (as padding) until the last one does; on a CPU a training step's generation is
bound by the model's weights at every token step, so both cost in full. Here:

- **prefill**: the prompts are packed as a tree of shared prefixes (grpokit.generation.tree): a group's prompt and a
  system prompt or tool block shared across prompts are computed once, and each row's KV cache is gathered from
  the tree's (exact: a position's keys and values depend only on the tokens before it);
- **decode**: a row leaves the batch (and its cache) at its stop id;
- **the same samples**: the logits processors are transformers' own classes in `generate`'s order (repetition
  penalty, min_new_tokens, suppressed tokens, then the sampling warpers of grpokit.generation.sampling), and every
  token step draws `torch.multinomial` over all rows, finished ones given a certain token, so the random stream is
  consumed exactly as `generate` consumes it (torch's multinomial draws one exponential number per row and token,
  whatever the probabilities, and takes the argmax of p / q). Only float rounding of the differently shaped matrix
  products can change a draw (measured: docs/measurements.md "Every token once");
- **or the inverse draw** (`draw="inverse"`, `generation.draw: inverse`): one uniform number a row against the
  cumulative probabilities (grpokit.generation.sampling.inverse_draw): the same distribution, another stream, and
  no exponential number per vocabulary entry, which at a large step's hundreds of rows outweighs the forward;
- **or the draw over the nucleus only** (`draw="nucleus"`, the recipe's `generation.draw: nucleus`): the warpers'
  kept tokens decided on the candidates, the token drawn among them (grpokit.generation.sampling.NucleusDraw):
  the same distribution, another random stream, so a seed gives other completions than `generate`'s.

`Decoding.from_generation_config` reads a transformers GenerationConfig (what TRL passes to `generate`) and
answers why not for anything this loop does not do (beam search, n-gram bans, constraints, ...): the caller then
uses `generate` itself. `refusal(model)` (grpokit.generation.tree) says which models cannot take the tree.

The token step after the prefill is grpokit.generation.steps': eager over transformers' DynamicCache, or with
`compile=True` (`generation.compile`) through torch.compile over a static cache of its own.

Not covered: encoder-decoder and multimodal models, transformers' static cache (`generation.cache: static` keeps
`generate`), stop strings.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from grpokit import hf_internals
from grpokit.generation.sampling import CANDIDATES, NucleusDraw, inverse_draw, warpers
from grpokit.generation.tree import TreeCost, mask_form, pack, positions

# GenerationConfig fields this loop reads; any other field set away from its default sends the call to `generate`.
READS = frozenset({"max_new_tokens", "min_new_tokens", "do_sample", "temperature", "top_k", "top_p", "min_p",
                   "repetition_penalty", "eos_token_id", "pad_token_id", "bos_token_id", "suppress_tokens",
                   "use_cache", "disable_compile", "transformers_version", "_from_model_config", "num_return_sequences",
                   "max_length", "return_dict_in_generate", "output_scores", "output_logits"})


@dataclass(frozen=True)
class Decoding:
    """What to decode: transformers' generation settings that this loop honours, with vLLM-like names kept out."""

    max_new_tokens: int
    stop_ids: tuple[int, ...]
    pad_id: int
    sample: bool = True
    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    min_p: float | None = None
    repetition_penalty: float = 1.0
    min_new_tokens: int = 0
    suppress_tokens: tuple[int, ...] = ()
    top_p_candidates: int = CANDIDATES  # grpokit.generation.sampling; 0: transformers' own TopPLogitsWarper
    record_logprobs: bool = False  # each drawn token's log-prob under log_softmax(raw logits / temperature)
    # grpokit.generation.backends.DRAWS; the loop's own default keeps generate's samples for a seed (the module's
    # promise, tests/test_decode.py); the recipe's generation.draw (default: vocabulary, grpokit.generation.backends.DRAW) is
    # what training, evaluation and preflight pass
    draw: str = "vocabulary"
    compile: bool = False  # the token step through torch.compile over a static cache (grpokit.generation.steps)

    @classmethod
    def from_generation_config(cls, config, top_p_candidates: int = CANDIDATES, record_logprobs: bool = False,
                               draw: str = "vocabulary", compile: bool = False) -> Decoding | str:
        """The decoding a transformers GenerationConfig asks for, or why this loop cannot do it (a string)."""
        set_fields = set(config.to_diff_dict())
        unread = sorted(k for k in set_fields - READS if getattr(config, k, None) not in (None, False, 0, 1.0, [], {}))
        if unread:
            return f"generation settings grpokit's decoding loop does not read: {', '.join(unread)}"
        if (config.num_return_sequences or 1) > 1:
            return "num_return_sequences > 1 (the rows are passed repeated instead)"
        if getattr(config, "cache_implementation", None) not in (None, "dynamic"):
            return f"cache_implementation {config.cache_implementation!r}"
        if getattr(config, "disable_compile", True) is False:
            return "torch.compile of the decode step (generation.compile)"
        if config.max_new_tokens is None:
            return "no max_new_tokens"
        stops = config.eos_token_id
        stops = () if stops is None else (stops,) if isinstance(stops, int) else tuple(stops)
        pad = config.pad_token_id if config.pad_token_id is not None else (stops[0] if stops else None)
        if pad is None:
            return "neither pad_token_id nor eos_token_id"
        return cls(max_new_tokens=int(config.max_new_tokens), stop_ids=tuple(int(s) for s in stops), pad_id=int(pad),
                   sample=bool(config.do_sample), temperature=float(config.temperature or 1.0),
                   top_k=int(config.top_k or 0), top_p=float(config.top_p if config.top_p is not None else 1.0),
                   min_p=config.min_p, repetition_penalty=float(config.repetition_penalty or 1.0),
                   min_new_tokens=int(config.min_new_tokens or 0),
                   suppress_tokens=tuple(config.suppress_tokens or ()), top_p_candidates=top_p_candidates,
                   record_logprobs=record_logprobs, draw=draw, compile=compile)

    @property
    def nucleus(self) -> bool:
        """The next token is drawn among the nucleus only (draw: nucleus, and a nucleus NucleusDraw decides)."""
        return self.sample and self.draw == "nucleus" and NucleusDraw.applies(self.top_k, self.top_p, self.min_p,
                                                                              self.top_p_candidates)

    def applied(self) -> str:
        """What this loop does to the logits, in order, with the values it reads (`repetition_penalty: 2` in a recipe
        is applied as 2.0): said once per run of settings when decoding starts (`_say`)."""
        steps = [f"repetition penalty {self.repetition_penalty:g}" if self.repetition_penalty != 1.0 else "",
                 f"min_new_tokens {self.min_new_tokens}" if self.min_new_tokens and self.stop_ids else "",
                 f"{len(self.suppress_tokens)} suppressed token(s)" if self.suppress_tokens else ""]
        if self.sample:
            steps += [f"temperature {self.temperature:g}", f"top_k {self.top_k}" if self.top_k else "",
                      f"top_p {self.top_p:g}" if self.top_p < 1.0 else "",
                      f"min_p {self.min_p:g}" if self.min_p is not None else "",
                      "sampled over the nucleus only" if self.nucleus else
                      "sampled by inverse transform" if self.draw == "inverse" else "sampled"]
        else:
            steps.append("greedy")
        return ", ".join(s for s in steps if s)

    def processors(self, prompt_width: int):
        """transformers' processors for these settings, in `generate`'s order (`_get_logits_processor`: the
        penalties and length rules first, the sampling warpers last; no warpers when the nucleus draw applies
        them itself)."""
        from transformers import (LogitsProcessorList, MinNewTokensLengthLogitsProcessor,
                                  RepetitionPenaltyLogitsProcessor, SuppressTokensLogitsProcessor)

        out = LogitsProcessorList()
        if self.repetition_penalty != 1.0:
            out.append(RepetitionPenaltyLogitsProcessor(penalty=self.repetition_penalty))
        if self.min_new_tokens and self.stop_ids:
            out.append(MinNewTokensLengthLogitsProcessor(prompt_width, self.min_new_tokens, list(self.stop_ids)))
        if self.suppress_tokens:
            out.append(SuppressTokensLogitsProcessor(list(self.suppress_tokens)))
        if self.sample and not self.nucleus:
            out.extend(warpers(self.temperature, self.top_k, self.top_p, self.min_p, candidates=self.top_p_candidates))
        return out


_SAID: set[str] = set()


def _say(decoding: Decoding) -> None:
    """Name once per process what the loop applies to the logits (transformers' processors: `Decoding.applied`)."""
    what = decoding.applied()
    if what != "greedy" and what not in _SAID:  # greedy with nothing on the logits: nothing to say
        from grpokit.console import console

        _SAID.add(what)
        console.print(f"[dim]grpokit's decoding loop applies: {what}[/]", highlight=False)


@dataclass
class Decoded:
    ids: list[list[int]]  # per row: generated ids up to and including the first stop id (or max_new_tokens of them)
    logprobs: list[list[float]] | None = None  # per row, per generated id (Decoding.record_logprobs)
    prefill_positions: int = 0  # positions the prefill computed (the tree's)
    padded_prefill_positions: int = 0  # what prefilling every row left-padded (generate's layout) computes
    steps: int = 0  # token steps run
    row_steps: int = 0  # rows decoded, summed over the steps (generate's: rows x steps)
    extra: dict = field(default_factory=dict)
    compiled: bool = False  # every token step ran compiled (grpokit.generation.steps)


def prefill(model, prompts: list[list[int]], cost: TreeCost | None = None):
    """Every row's prompt's keys and values, left-padded to the longest, and the logits after each prompt, from a
    forward pass over the tree of the prompts' shared prefixes. Returns (per layer (keys, values), each (rows,
    kv_heads, width, head_dim); logits (rows, vocab) float32; attention mask (rows, width); positions computed)."""
    import torch

    device = next(model.parameters()).device
    dtype = next(p.dtype for p in model.parameters() if p.is_floating_point())
    rows, width = len(prompts), max(map(len, prompts))
    trees = pack(prompts, [len(p) for p in prompts], cost)  # nothing scored: prefixes only
    layers, logits = None, None
    for tree in trees:
        inputs = tree.inputs(mask_form(model), device, dtype)
        inputs.pop("shift_labels")
        ends = sorted({tree.paths[r][-1] for r in tree.rows})
        cache = hf_internals.cache_of([])
        out = model(**inputs, **{hf_internals.cache_keyword(model): cache}, use_cache=True,
                    logits_to_keep=torch.tensor(ends, device=device))
        at = {node: i for i, node in enumerate(ends)}
        here = torch.tensor(tree.rows, device=device)
        # each row's path through the tree, left-padded (pads point at position 0 and are masked out)
        index = torch.tensor([[0] * (width - len(tree.paths[r])) + tree.paths[r] for r in tree.rows], device=device)
        kv = hf_internals.cache_tensors(cache)
        if layers is None:
            layers = [(k.new_empty(rows, k.size(1), width, k.size(3)), v.new_empty(rows, v.size(1), width, v.size(3)))
                      for k, v in kv]
            logits = torch.empty(rows, out.logits.size(-1), dtype=torch.float32, device=device)
        for (k_all, v_all), (k, v) in zip(layers, kv):
            k_all[here] = k[0][:, index].permute(1, 0, 2, 3)
            v_all[here] = v[0][:, index].permute(1, 0, 2, 3)
        logits[here] = out.logits[0, [at[tree.paths[r][-1]] for r in tree.rows]].float()
    lengths = torch.tensor([len(p) for p in prompts], device=device)
    mask = (torch.arange(width, device=device)[None] >= (width - lengths)[:, None]).long()
    return layers, logits, mask, positions(trees)


def decode(model, prompts: list[list[int]], decoding: Decoding, cost: TreeCost | None = None) -> Decoded:
    """Generate for each row of `prompts` (see the module docstring). Runs under torch.no_grad(); the caller sets
    the seed (and the model's eval mode, as `generate` expects; a compiled step puts a model without dropout in
    eval mode for the call: one graph for training's sampling and evaluation)."""
    import torch

    from grpokit.generation.steps import step_choice

    training = model.training and decoding.max_new_tokens > 1 and step_choice(model, decoding.compile) is None
    try:
        if training:
            model.eval()
        with torch.no_grad():
            return _decode(model, prompts, decoding, cost)
    finally:
        if training:
            model.train()


def _decode(model, prompts, decoding: Decoding, cost) -> Decoded:
    import torch

    from grpokit.generation.steps import make_step

    device = next(model.parameters()).device
    rows, width = len(prompts), max(map(len, prompts))
    layers, logits, mask, computed = prefill(model, prompts, cost)
    done = Decoded([[] for _ in prompts], [[] for _ in prompts] if decoding.record_logprobs else None,
                   prefill_positions=computed, padded_prefill_positions=rows * width)
    seq = torch.tensor([[decoding.pad_id] * (width - len(p)) + list(p) for p in prompts], device=device)
    position = mask.sum(dim=1)  # the next token's position: generate's cumsum of the mask
    active = torch.arange(rows, device=device)
    stops = torch.tensor(decoding.stop_ids or (-1,), device=device)
    processors = decoding.processors(width)
    _say(decoding)
    draw = NucleusDraw(decoding.temperature, decoding.top_k, decoding.top_p, decoding.top_p_candidates) \
        if decoding.nucleus else None
    step = make_step(model, layers, mask, decoding.max_new_tokens, decoding.compile) \
        if decoding.max_new_tokens > 1 else None
    try:
        for i in range(decoding.max_new_tokens):
            scores = processors(seq, logits)
            token = draw(scores) if draw is not None else _choose(scores, decoding, active, rows)
            if decoding.record_logprobs:
                drawn = torch.log_softmax(logits / (decoding.temperature or 1.0), dim=-1).gather(1, token[:, None])
                for r, lp in zip(active.tolist(), drawn.squeeze(1).tolist()):
                    done.logprobs[r].append(lp)
            for r, t in zip(active.tolist(), token.tolist()):
                done.ids[r].append(t)
            done.steps, done.row_steps = i + 1, done.row_steps + len(active)
            if i + 1 == decoding.max_new_tokens:
                break
            going = ~torch.isin(token, stops)
            if not bool(going.all()):  # finished rows leave the batch, their cache with them
                keep = going.nonzero().squeeze(1)
                if keep.numel() == 0:
                    break
                step.keep(keep)
                active, token, seq, position = active[keep], token[keep], seq[keep], position[keep]
            seq = torch.cat([seq, token[:, None]], dim=1)
            logits = step(token, position)
            position = position + 1
    finally:
        if step is not None:
            step.close()
    done.compiled = step is not None and step.compiled and step.eager is None
    return done


def answer_generate(model, input_ids, attention_mask, decoding: Decoding, cost: TreeCost | None = None):
    """What `model.generate(input_ids=..., attention_mask=...)` returns (the left-padded prompts, then each row's
    completion padded with pad_id), computed by `decode`; and the Decoded record (recorded log-probs, positions)."""
    import torch

    prompts = [row[m.bool()].tolist() for row, m in zip(input_ids, attention_mask)]
    done = decode(model, prompts, decoding, cost)
    width = max(map(len, done.ids))
    completions = torch.full((len(prompts), width), decoding.pad_id, dtype=input_ids.dtype, device=input_ids.device)
    for i, ids in enumerate(done.ids):
        completions[i, :len(ids)] = torch.tensor(ids, dtype=input_ids.dtype)
    return torch.cat([input_ids, completions], dim=1), done


def replacing_generate(model, top_p_candidates: int = CANDIDATES, log=None, draw: str = "vocabulary",
                       compile: bool = False):
    """A replacement for `model.generate` calls made as TRL makes them (keywords input_ids, attention_mask,
    generation_config): answered by `decode` when the settings and the model allow, else by `generate` itself
    (`log` says why, once). For grpokit.generation_internals.generate_through: `replacement(generate, *args, **kwargs)`."""
    from grpokit.generation.tree import refusal

    said, cost = [], []

    def replacement(generate, *args, **kwargs):
        config = kwargs.get("generation_config")
        why = refusal(model) or ("not called as TRL calls it" if args or config is None else None)
        decoding = why or Decoding.from_generation_config(config, top_p_candidates, draw=draw, compile=compile)
        if isinstance(decoding, str):
            if log is not None and not said:
                said.append(decoding)
                log(f"generation: transformers' generate: {decoding}")
            return generate(*args, **kwargs)
        cost[:] = cost or [TreeCost.of(model)]
        return answer_generate(model, kwargs["input_ids"], kwargs["attention_mask"], decoding, cost[0])[0]

    return replacement


def _choose(scores, decoding: Decoding, active, rows: int):
    """The next token of each active row: argmax; the inverse draw (sampling.inverse_draw) over the active rows; or
    one multinomial draw over all `rows` (finished rows given a certain token) so the random stream advances exactly
    as in `generate` (module docstring; the vocabulary draw)."""
    import torch

    if not decoding.sample:
        return scores.argmax(dim=-1)
    if decoding.draw == "inverse":  # its own stream: the finished rows need no draw to keep it aligned
        return inverse_draw(scores)
    probs = torch.softmax(scores, dim=-1)
    if len(active) == rows:
        return torch.multinomial(probs, num_samples=1).squeeze(1)
    full = probs.new_zeros(rows, probs.size(1))
    full[:, decoding.pad_id] = 1.0
    full[active] = probs
    return torch.multinomial(full, num_samples=1).squeeze(1)[active]
