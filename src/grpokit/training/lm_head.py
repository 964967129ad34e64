"""The fused LM head's per-token log-probs on a CPU: the projection and a few whole passes over its logits.

    with internals.fused_head_kernel(CpuHead):                # a GrpokitTrainer's log-prob calls
        out = model(..., fused_lm_head=True)                  # TRL's add_fused_lm_head, log_probs / entropy / is_top1

TRL's `add_fused_lm_head` computes each scored position's log-prob (and entropy, is_top1) with
`ChunkedLogProbFunction` (trl.kernels.chunked_logprob): the projection in tiles of 4,096 tokens x 4,096 vocabulary
entries, each tile folded into online-logsumexp statistics, and the backward recomputing every tile. On a device
without Triton the fold is plain torch on each tile, about fifteen separate passes over it (a multiplication by
the logit scale and another by 1 / temperature even when both are 1, a boolean tile for is_top1, the target's
one-hot built by comparison, zeros filled, ...): on a 2-core CPU those passes took three times the head's own
matrix products, the largest cost of the loss after the backbone's (docs/measurements.md "The large step").

`CpuHead` computes the same fields on a CPU with torch's fused row operations over a chunk of tokens x the whole
vocabulary: forward, the projection, the target's logit gathered, log Z and the entropy from one exponential pass
and one row dot product (`logsumexp` alone without the entropy), is_top1 from one argmax; backward, the projection
again (the logits are not kept: a chunk of tokens x 49,152 or 151,936 entries is hundreds of MB), one softmax in
place, the target's column put in place, and the two gradient products. The results are TRL's up to float rounding (tests/test_large_step.py compares values and
gradients).

Where it does not apply, TRL's own function runs, unchanged: another device than the CPU, a final-logit softcap,
or fields other than log_probs, entropy and is_top1 asked for.
"""
from __future__ import annotations

import torch

# Tokens per chunk: a chunk's logits are TOKENS x vocabulary float32 (1,024 x 151,936 = 622 MB for Qwen3), made once
# in the forward and once in the backward; fewer tokens a chunk would only add calls.
TOKENS = 1024
FIELDS = ("entropy", "is_top1")  # the optional fields CpuHead computes; any other sends the call to TRL's function


class CpuHead:
    """TRL's `ChunkedLogProbFunction` in the call `add_fused_lm_head` makes (`apply(hidden, weight, bias, targets,
    temperature, chunk_size, final_logit_softcapping, logit_scale, outputs)`), answered by `CpuLogProbs` where it
    applies (the module docstring) and by `original` elsewhere."""

    def __init__(self, original):
        self.original = original

    def applies(self, hidden, final_logit_softcapping, outputs) -> bool:
        return hidden.device.type == "cpu" and final_logit_softcapping is None and set(outputs) <= set(FIELDS)

    def apply(self, hidden, weight, bias, targets, temperature, chunk_size, final_logit_softcapping=None,
              logit_scale=1.0, outputs=("log_probs",)):
        outputs = tuple(o for o in outputs if o != "log_probs")
        if not self.applies(hidden, final_logit_softcapping, outputs):
            return self.original.apply(hidden, weight, bias, targets, temperature, chunk_size,
                                       final_logit_softcapping, logit_scale, outputs)
        return CpuLogProbs.apply(hidden, weight, bias, targets, float(logit_scale) / float(temperature), outputs)


def _logits(hidden, weight, bias, scale: float, dtype):
    """(tokens, vocabulary) float32 logits of a chunk, scaled (the logit scale over the temperature)."""
    # F.linear rather than mm with the weight transposed: the same product, and faster through MKL on the CPU
    z = torch.nn.functional.linear(hidden.to(dtype), weight.to(dtype), None if bias is None else bias.to(dtype))
    z = z.float()
    return z.mul_(scale) if scale != 1.0 else z


class CpuLogProbs(torch.autograd.Function):
    """log p(target), and on request the entropy and whether the target is the first maximum, of `hidden @
    weight.T (+ bias)` times `scale`, computed a chunk of TOKENS tokens at a time (the module docstring). Returns
    TRL's five outputs (log_probs, entropy, log_sum_sq_probs, mean_logits, is_top1), the fields not asked None."""

    @staticmethod
    def forward(ctx, hidden, weight, bias, targets, scale: float, outputs: tuple):
        ctx.set_materialize_grads(False)  # the entropy is often for logging only: no gradient to fill with zeros
        dtype = torch.get_autocast_dtype("cpu") if torch.is_autocast_enabled("cpu") else hidden.dtype
        n = hidden.shape[0]
        log_z = hidden.new_empty(n, dtype=torch.float32)
        log_probs = hidden.new_empty(n, dtype=torch.float32)
        entropy = hidden.new_empty(n, dtype=torch.float32) if "entropy" in outputs else None
        is_top1 = torch.empty(n, dtype=torch.bool, device=hidden.device) if "is_top1" in outputs else None
        with torch.autocast("cpu", enabled=False):
            for a in range(0, n, TOKENS):
                b = min(a + TOKENS, n)
                z = _logits(hidden[a:b], weight, bias, scale, dtype)
                target = z.gather(1, targets[a:b, None]).squeeze(1)
                if is_top1 is not None:  # argmax gives the first maximum: a tie with an earlier token is no top-1
                    is_top1[a:b] = z.argmax(dim=-1) == targets[a:b]
                if entropy is None:
                    log_z[a:b] = torch.logsumexp(z, dim=-1)
                else:  # one exponential pass for both: e = exp(z - max), log Z = max + log sum e, H = log Z - E_p[z]
                    top = z.amax(dim=-1, keepdim=True)
                    e = (z - top).exp_()
                    total = e.sum(dim=-1)
                    log_z[a:b] = top.squeeze(1) + total.log()
                    entropy[a:b] = log_z[a:b] - torch.linalg.vecdot(e, z) / total
                log_probs[a:b] = target - log_z[a:b]
        ctx.save_for_backward(hidden, weight, bias, targets, log_z, log_z if entropy is None else entropy)
        ctx.scale, ctx.dtype = scale, dtype
        if is_top1 is not None:
            ctx.mark_non_differentiable(is_top1)
        return log_probs, entropy, None, None, is_top1

    @staticmethod
    def backward(ctx, grad_log_probs, grad_entropy, *_):
        hidden, weight, bias, targets, log_z, entropy = ctx.saved_tensors
        if grad_log_probs is None and grad_entropy is None:
            return None, None, None, None, None, None
        need_hidden, need_weight, need_bias = ctx.needs_input_grad[:3]
        grad_hidden = torch.zeros(hidden.shape, dtype=torch.float32, device=hidden.device) if need_hidden else None
        grad_weight = torch.zeros(weight.shape, dtype=torch.float32, device=weight.device) if need_weight else None
        grad_bias = torch.zeros(bias.shape, dtype=torch.float32, device=bias.device) if need_bias else None
        n = hidden.shape[0]
        with torch.autocast("cpu", enabled=False):
            for a in range(0, n, TOKENS):
                b = min(a + TOKENS, n)
                z = _logits(hidden[a:b], weight, bias, ctx.scale, ctx.dtype)
                # d log p_t / dz_j = 1[j = t] - p_j;  d H / dz_j = -p_j (log p_j + H)
                log_p = z.sub_(log_z[a:b, None])  # z is not needed again: everything in place
                if grad_entropy is not None:
                    h = (log_p + entropy[a:b, None]).mul_(grad_entropy[a:b, None].float())
                    if grad_log_probs is not None:
                        h.add_(grad_log_probs[a:b, None].float())
                    grad = log_p.exp_().mul_(h).neg_()
                else:
                    grad = log_p.exp_().mul_(grad_log_probs[a:b, None].float()).neg_()
                if grad_log_probs is not None:
                    grad.scatter_add_(1, targets[a:b, None], grad_log_probs[a:b, None].float())
                if ctx.scale != 1.0:
                    grad.mul_(ctx.scale)
                grad = grad.to(ctx.dtype)
                if grad_hidden is not None:
                    grad_hidden[a:b] = torch.mm(grad, weight.to(ctx.dtype)).float()
                if grad_weight is not None:
                    grad_weight.addmm_(grad.t().float(), hidden[a:b].float())
                if grad_bias is not None:
                    grad_bias += grad.sum(dim=0, dtype=torch.float32)
        return (None if grad_hidden is None else grad_hidden.to(hidden.dtype),
                None if grad_weight is None else grad_weight.to(weight.dtype),
                None if grad_bias is None else grad_bias.to(bias.dtype), None, None, None)
