"""The detectors that read the sampled completions themselves (samples.jsonl), not the metrics: empty output and
loops. Each judges the latest step's samples; thresholds: their rows of grpokit.recipe.HEALTH_CODES. The metric
detectors are grpokit.health.detectors, which lists these in DETECTORS with the rest."""
from __future__ import annotations

from grpokit.health.findings import Finding, is_finite, rounded


def _blank(text: str, config) -> bool:
    return len("".join(str(text).split())) < config.empty_chars


def detect_empty(metrics, samples, config, context) -> Finding | None:
    step = metrics[-1]["step"]
    texts = [x.get("completion", "") for x in samples]
    share = sum(_blank(t, config) for t in texts) / len(texts) if texts else 0.0
    mean_len = metrics[-1].get("completions/mean_length")
    if not (texts and share >= config.empty_frac) and not (is_finite(mean_len) and mean_len < 1):
        return None
    return Finding("empty_completions", step,
                   f"{rounded(share * 100, 1)}% of sampled completions are empty or nearly so (mean length "
                   f"{mean_len}). Fix (Qwen3-4B/14B article): sample with temperature >= 0.9 (low temperature with top_p "
                   "collapses into empty or looping output) and give very short completions a large negative score "
                   "(the `length` reward's short_penalty; the Qwen3-4B/14B article uses < 50 characters)",
                   {"empty_share": rounded(share), "samples": len(texts), "mean_length": mean_len,
                    "examples": [t[:40] for t in texts if _blank(t, config)][:3]}, since=step)


def repeated_share(text: str, n: int) -> float:
    """Share of word n-grams (characters for unspaced text such as Chinese) that repeat an earlier one."""
    units = str(text).split()
    if len(units) < 2 * n:
        units = [c for c in str(text) if not c.isspace()]
    grams = [tuple(units[i:i + n]) for i in range(len(units) - n + 1)]
    if len(grams) < 4:
        return 0.0
    return 1 - len(set(grams)) / len(grams)


def detect_repetition(metrics, samples, config, context) -> Finding | None:
    texts = [x.get("completion", "") for x in samples]
    if not texts:
        return None
    shares = [repeated_share(t, config.repetition_ngram) for t in texts]
    bad = [t for t, r in zip(texts, shares) if r >= config.repetition_ratio]
    if len(bad) / len(texts) < config.repetition_frac:
        return None
    step = metrics[-1]["step"]
    return Finding("repetition", step,
                   f"{len(bad)}/{len(texts)} sampled completions repeat the same {config.repetition_ngram}-grams. Fix "
                   "(Qwen3-0.6B-Base article): raise temperature to 0.9 or more, and check max_completion_length (loops run "
                   "until the limit; see truncation)",
                   {"repeated_share": [rounded(x, 3) for x in shares], "threshold": config.repetition_ratio,
                    "examples": [t[:80] for t in bad[:2]]}, since=step)
