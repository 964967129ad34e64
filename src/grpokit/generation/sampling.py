"""Nucleus (top-p) filtering without sorting the whole vocabulary: the same kept tokens as transformers' warper.

    model.generate(**inputs, do_sample=True, **NEUTRAL, logits_processor=warpers(temperature=0.7, top_p=0.9))

transformers' `TopPLogitsWarper` sorts every row's whole vocabulary at every token step (49,152 logits for
SmolLM2, 151,936 for Qwen3): on the 2-core CPU that sort was a large share of a token step
(docs/measurements.md "What the measurements decided"), while the nucleus of a trained model is a few dozen
tokens. `TopPCandidates` takes the
`candidates` most likely tokens with `torch.topk`, normalises them against the whole row (one logsumexp), and
decides which to keep with transformers' own rule (a token is removed when the probability mass of the tokens
less likely than it, itself included, is at most 1 - top_p; the most likely `min_tokens_to_keep` always stay).
The scores it returns equal the warper's (the kept logits as they were, -inf elsewhere), so sampling from them
draws the same token ids for the same seed.

A row falls back to transformers' warper itself when the fast path could decide differently: its nucleus
reaches past the candidates, a mass sits within `MARGIN` of the threshold (transformers accumulates the mass
in float32 over the whole sorted vocabulary, so its rounding and ours differ by far less than that), or the
boundary splits tokens of equal logit (the two sorts may order ties differently). `warpers(...)` is the whole sampling tail of `generate` for a temperature, top_k, top_p and min_p, in
transformers' own order (temperature, top_k, top_p, min_p: `GenerationMixin._get_logits_processor`), with
`TopPCandidates` in the top_p slot. transformers appends a caller's processors before its own warpers, so
the caller switches those off (`NEUTRAL`) and passes these instead; every other processor (repetition
penalty, suppressed tokens, ...) still runs first, as it does without them.
"""
from __future__ import annotations

from grpokit import generation_internals

# torch and transformers are imported where they are used: importing the generation package stays light for the
# commands that load no model.

CANDIDATES = 256  # a nucleus of 0.9-0.95 on a trained model is tens of tokens; torch.topk(256) took 1.4 ms at 16 rows
MARGIN = 1e-4  # float32 mass differences between transformers' full cumulative sum and ours are ~1e-6
# The generation_config values that switch transformers' own sampling warpers off, so `warpers` replaces them.
NEUTRAL = generation_internals.NEUTRAL_SAMPLING


def warpers(temperature: float = 1.0, top_k: int | None = None, top_p: float = 1.0, min_p: float | None = None,
            candidates: int = CANDIDATES):
    """transformers' sampling warpers for these settings, in its order, top_p through `TopPCandidates`
    (candidates 0: transformers' own TopPLogitsWarper); a LogitsProcessorList."""
    from transformers import (LogitsProcessorList, MinPLogitsWarper, TemperatureLogitsWarper, TopKLogitsWarper,
                              TopPLogitsWarper)

    out = LogitsProcessorList()
    if temperature is not None and temperature != 1.0:
        out.append(TemperatureLogitsWarper(temperature))
    if top_k:
        out.append(TopKLogitsWarper(top_k=top_k, min_tokens_to_keep=1))
    if top_p is not None and top_p < 1.0:
        out.append(TopPCandidates(top_p, candidates) if candidates else TopPLogitsWarper(top_p, min_tokens_to_keep=1))
    if min_p is not None:
        out.append(MinPLogitsWarper(min_p=min_p, min_tokens_to_keep=1))
    return out


class TopPCandidates:
    """transformers' `TopPLogitsWarper`, computed on the `candidates` most likely tokens (see the module docstring).

    A logits processor by transformers' protocol (`__call__(input_ids, scores)`; LogitsProcessorList calls any
    such callable), not a subclass, so this module imports transformers only when one is built."""

    def __init__(self, top_p: float, candidates: int = CANDIDATES, min_tokens_to_keep: int = 1,
                 filter_value: float = -float("inf")):
        from transformers import TopPLogitsWarper

        if not 0.0 < top_p <= 1.0:
            raise ValueError(f"top_p must be in (0, 1], got {top_p}")
        self.top_p, self.candidates = float(top_p), int(candidates)
        self.min_tokens_to_keep, self.filter_value = int(min_tokens_to_keep), filter_value
        self.reference = TopPLogitsWarper(top_p, filter_value=filter_value, min_tokens_to_keep=min_tokens_to_keep)
        self.fallback_rows = 0  # rows decided by transformers' warper (counted for the benchmark)

    def decide(self, scores):
        """The nucleus of each row decided on its candidates: (values, index, remove, exact). `values` and `index`
        are the `candidates` largest scores of each row and their token ids, most likely first; `remove` marks the
        candidates transformers' warper removes; `exact` (rows,) is True where that decision is the warper's
        without looking past the candidates (the module docstring), False where only the warper itself can say."""
        import torch

        k = min(self.candidates, scores.shape[-1])
        values, index = scores.topk(k, dim=-1)  # most likely first
        probs = (values - torch.logsumexp(scores, dim=-1, keepdim=True)).exp()
        below_or_at = 1.0 - (probs.cumsum(dim=-1) - probs)  # mass of the tokens at most as likely as each candidate
        remove = below_or_at <= 1.0 - self.top_p
        remove[..., : self.min_tokens_to_keep] = False
        threshold = 1.0 - self.top_p
        unsure = (below_or_at - threshold).abs() < MARGIN
        kept = (~remove).sum(dim=-1, keepdim=True)
        last_kept = values.gather(-1, (kept - 1).clamp(max=k - 1))
        first_removed = values.gather(-1, kept.clamp(max=k - 1))
        exact = remove[..., -1] & ~unsure.any(dim=-1) & (last_kept != first_removed).squeeze(-1)
        return values, index, remove, exact

    def __call__(self, input_ids, scores):
        import torch

        if self.top_p >= 1.0:
            return scores
        values, index, remove, exact = self.decide(scores)
        out = torch.full_like(scores, self.filter_value)
        out.scatter_(-1, index, values.masked_fill(remove, self.filter_value))
        if not bool(exact.all()):
            rows = (~exact).nonzero(as_tuple=True)[0]
            self.fallback_rows += int(rows.numel())
            out[rows] = self.reference(None if input_ids is None else input_ids[rows], scores[rows])
        return out


class SampledLogprobs:
    """A logits processor that records, for each sampled token, log softmax(raw logits / temperature): the
    sampler's own log-probability of what it drew, as the trainer computes its own (TRL's
    `_get_per_token_logps_and_entropies` divides the logits by the temperature and takes no top-p / top-k into
    account: log-probs after top-p filtering would bias the ratio, TRL issue #6789).

    Put it first in `logits_processor`: it sees the logits before any warper and returns them unchanged. At each
    token step it keeps one (rows, vocab) float32 table and reads the previous step's drawn token from
    `input_ids`; `finish(sequences)` reads the last one. Memory: one row table at a time, not the logits of
    every step (which at Qwen3's 151,936-token vocabulary would be GBs).
    """

    def __init__(self, temperature: float = 1.0):
        self.temperature = temperature if temperature and temperature > 0 else 1.0
        self._table = None
        self._steps: list = []

    def __call__(self, input_ids, scores):
        import torch

        if self._table is not None:
            self._steps.append(self._table.gather(1, input_ids[:, -1:]).squeeze(1))
        self._table = torch.log_softmax(scores.float() / self.temperature, dim=-1)
        return scores

    def finish(self, sequences):
        """(rows, new tokens) float32 log-probs of the tokens `generate` returned after the prompt."""
        import torch

        if self._table is not None:
            self._steps.append(self._table.gather(1, sequences[:, -1:]).squeeze(1))
            self._table = None
        steps, self._steps = self._steps, []
        return torch.stack(steps, dim=1) if steps else torch.zeros(sequences.shape[0], 0)


class NucleusDraw:
    """The next token of each row drawn among the tokens transformers' warpers keep, and only among them.

    transformers' sampling (and `generate`'s random stream) draws with `torch.multinomial` over the whole
    vocabulary: its CPU kernel takes one exponential number per row and vocabulary entry, whatever the
    probabilities (49,152 for SmolLM2, 151,936 for Qwen3), the largest single cost of a CPU token step after the
    weights (docs/measurements.md "Every token once"). Here temperature and top_k are transformers' own warpers on
    the whole row, the nucleus is decided on the candidates (`TopPCandidates.decide`, the warper's kept tokens),
    and the draw is `torch.multinomial` over the candidates' probabilities with the removed ones at zero: the same
    distribution as softmax of the warper's scores (the tokens outside the nucleus have probability zero there),
    drawn from another random stream, so a seed gives other samples than `generate`'s (and the same ones on every
    run). A row the candidates cannot decide (`exact` False: a nucleus wider than the candidates, a mass at the
    threshold, a tie at the boundary) is drawn over the whole vocabulary from transformers' warper itself.

    Covers temperature, top_k and top_p; min_p is not decided here (`applies` says so): those settings keep the
    whole-vocabulary draw."""

    def __init__(self, temperature: float = 1.0, top_k: int | None = None, top_p: float = 1.0,
                 candidates: int = CANDIDATES):
        from transformers import TopPLogitsWarper

        if not self.applies(top_k, top_p, None, candidates):
            raise ValueError("a nucleus draw needs top_p < 1 or top_k, and candidates > 0")
        self.before = warpers(temperature, top_k, 1.0, None)  # transformers' temperature and top_k warpers
        self.top_p, self.top_k, self.candidates = float(top_p), int(top_k or 0), int(candidates)
        self.nucleus = TopPCandidates(top_p, candidates) if top_p < 1.0 else None
        self.reference = TopPLogitsWarper(top_p) if top_p < 1.0 else None
        self.fallback_rows = 0  # rows drawn over the whole vocabulary (counted for the benchmark and the tests)

    @staticmethod
    def applies(top_k: int | None, top_p: float, min_p: float | None, candidates: int) -> bool:
        """Whether there is a nucleus to draw from that this class decides: top_p < 1 or a top_k, no min_p, and
        candidates to decide it on."""
        return candidates > 0 and min_p is None and ((top_p is not None and top_p < 1.0) or bool(top_k))

    def __call__(self, scores):
        """(rows,) token ids, one draw per row of `scores` (the logits after the penalties, before any warper)."""
        import torch

        scores = self.before(None, scores)
        if self.nucleus is not None:
            values, index, remove, exact = self.nucleus.decide(scores)
        else:  # top_k alone: the nucleus is the tokens the top_k warper left finite
            values, index = scores.topk(min(self.candidates, scores.shape[-1]), dim=-1)
            remove = torch.isinf(values)
            exact = remove[:, -1]  # the last candidate is out: every kept token is a candidate
        tokens = torch.empty(scores.shape[0], dtype=torch.long, device=scores.device)
        fast = exact.nonzero(as_tuple=True)[0]
        if fast.numel():
            probs = torch.softmax(values[fast].masked_fill(remove[fast], -float("inf")), dim=-1)
            tokens[fast] = index[fast].gather(1, torch.multinomial(probs, num_samples=1)).squeeze(1)
        if fast.numel() < len(tokens):
            slow = (~exact).nonzero(as_tuple=True)[0]
            self.fallback_rows += int(slow.numel())
            kept = scores[slow] if self.reference is None else self.reference(None, scores[slow])
            tokens[slow] = torch.multinomial(torch.softmax(kept, dim=-1), num_samples=1).squeeze(1)
        return tokens


def inverse_draw(scores):
    """(rows,) token ids, one draw per row of `scores` (logits after every processor and warper; -inf: never drawn)
    by inverse transform sampling: one uniform number a row, placed on the row's cumulative probabilities.

    The same distribution as `torch.multinomial(softmax(scores), 1)`, from another random stream: torch's CPU
    multinomial draws one exponential number per row and vocabulary entry (the race of p / q), which at a large
    step's hundreds of rows over 49,152 or 151,936 entries costs more than the forward's matrix products; here a
    softmax, a cumulative sum and a binary search (`grpokit.generation.backends.DRAWS`: generation.draw: inverse).
    The sum is float32, so a token's share is its probability up to a rounding of about 1e-7 of the row's mass,
    far below anything a completion's reward can tell; a token of probability zero (a warper's -inf) spans no
    interval and is never drawn (searchsorted's right side: the first cumulative value above the number)."""
    import torch

    cumulative = torch.softmax(scores.float(), dim=-1).cumsum_(dim=-1)
    number = torch.rand(scores.shape[0], 1, device=scores.device) * cumulative[:, -1:]
    return torch.searchsorted(cumulative, number, right=True).clamp_(max=scores.shape[-1] - 1).squeeze(1)
