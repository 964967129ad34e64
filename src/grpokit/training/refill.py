"""The trainer side of signal-aware training: pass-rate tracking, prompt selection, DAPO's dynamic sampling.

    grpokit train RECIPE.yaml --set selection.enabled=true --set selection.refill=true

`Selection` is a GrpokitTrainer's selection part (grpokit.training.trainer: steps 2 and 3 of a batch). Through
the trainer's hooks (grpokit.internals: TRL's `_get_train_sampler`, `_generate_and_score_completions`,
`_save_checkpoint`) it

- updates the per-prompt pass-rate estimates (grpokit.training.selection) from every
  generation batch's rewards, and logs `grpokit/bands/<band>` and
  `grpokit/signal_groups` (share of the groups trained on with a reward spread);
- with `selection.enabled`, replaces TRL's RepeatSampler by `SignalSampler`;
- with `selection.refill` (the DAPO paper's dynamic sampling, which TRL 1.16
  lacks): when a generation batch has fewer groups with a reward spread
  than it holds, generates further batches of groups (at most
  `selection.refill_max_rounds`, prompts chosen like the sampler's, or
  uniformly when selection is off), keeps the groups with a spread and
  trains on a batch of the usual size made of them (tied groups fill what is
  still missing), on one process or several (below). With `selection.refill_upfront` the refill prompts are
  chosen before generating and generated in the same call as the step's own
  (every step pays for them; decoding many rows at once costs little more
  than a few where reading the weights bounds it). Logged: `grpokit/refill/rounds`, `grpokit/refill/extra_groups`
  (groups generated beyond the step's own), `grpokit/refill/discarded_tokens`
  (completion tokens of the groups not trained on);
- saves the estimates into each checkpoint (`grpokit_selection.json`) and
  loads them on resume.

TRL's own metrics (reward, frac_reward_zero_std, completion lengths) describe
everything generated in the step, refills included: the health monitor's
zero_variance_groups reads that pre-filter share. The batch keeps TRL's
layout (prompts left-padded, completions right-padded), so train.skip_no_signal
and TRL's loss see an ordinary batch; `num_items_in_batch` is recounted over it.

With several processes (DDP, ZeRO) every process keeps and replaces whole groups of its own share of the
batch: the estimates are updated from the rewards TRL gathers, so every process draws the same refill picks
and takes its slice, every process runs the same number of rounds (a round's generation gathers across
them), and the loss normaliser is recounted over every process's kept tokens. Each process's share must hold
whole groups (per_device_train_batch_size x steps_per_generation a multiple of num_generations; refused with
a message otherwise).

Not covered: multimodal batches or tool masks.
"""
from __future__ import annotations

from pathlib import Path

import torch

from grpokit import internals
from grpokit.distributed import any_rank
from grpokit.recipe import batch_geometry
from grpokit.task import reward_roles
from grpokit.training.no_signal import signal_rows
from grpokit.training.selection import Selector, SignalSampler, check_processes, prompt_key


def group_signal(advantages: torch.Tensor, group: int) -> torch.Tensor:
    """Boolean (groups,): whether any completion of each group of `group` consecutive rows has an advantage."""
    return signal_rows(advantages).view(-1, group).any(dim=1)


def _pad_cat(tensors: list[torch.Tensor], value, left: bool) -> torch.Tensor:
    width = max(t.shape[1] for t in tensors)
    out = []
    for t in tensors:
        pad = t.new_full((t.shape[0], width - t.shape[1], *t.shape[2:]), value)
        out.append(torch.cat([pad, t] if left else [t, pad], dim=1))
    return torch.cat(out, dim=0)


def merge_rows(parts: list[tuple[dict, torch.Tensor]], pad_id: int) -> dict:
    """One batch from rows of several: `parts` = (batch, row index tensor); TRL's padding sides kept."""
    first = parts[0][0]
    out = {}
    for key, value in first.items():
        if key == internals.NUM_ITEMS or not isinstance(value, torch.Tensor):
            continue
        pieces = [b[key][rows] for b, rows in parts]
        if key in (internals.PROMPT_IDS, internals.PROMPT_MASK):
            out[key] = _pad_cat(pieces, pad_id if key == internals.PROMPT_IDS else 0, left=True)
        elif value.dim() >= 2:  # completion ids/mask and the (B, C) tensors aligned with them
            out[key] = _pad_cat(pieces, pad_id if key == internals.COMPLETION_IDS else 0, left=False)
        else:
            out[key] = torch.cat(pieces, dim=0)
    # The dapo/cispo/vespo normaliser: the token count of the batch actually trained on.
    out[internals.NUM_ITEMS] = out[internals.COMPLETION_MASK].sum().to(first[internals.NUM_ITEMS].dtype if isinstance(
        first[internals.NUM_ITEMS], torch.Tensor) else torch.long)
    return out


class Selection:
    """The selection part of a trainer (the module docstring): its `selector` (grpokit.training.selection) and
    what it does at each of the trainer's hooks, the trainer passed in."""

    def __init__(self, selector: Selector):
        self.selector = selector

    # -- the prompts each step trains on
    def sampler(self, trainer, dataset, trl_sampler):
        s = self.selector
        if not s.config.enabled or len(dataset if dataset is not None else trainer.train_dataset) != len(s):
            return trl_sampler(dataset)
        return SignalSampler(s, **internals.sampler_layout(trainer))

    def _scored(self, trainer, inputs, trl_generate):
        """TRL's generation and scoring of `inputs`, then the estimates updated from its rewards."""
        rows = len(inputs) * trainer.accelerator.num_processes
        internals.widen_logs(trainer, rows)
        batch = trl_generate(inputs)
        prompts, rewards = internals.generation_rewards(trainer, rows)
        self.selector.observe(prompts, rewards, trainer.args.num_generations)
        return batch

    def generate(self, trainer, inputs, trl_generate):
        if not trainer.model.training:
            return trl_generate(inputs)
        g, cfg = trainer.args.num_generations, self.selector.config
        if cfg.refill and cfg.refill_upfront and not any(k in inputs[0] for k in ("image", "images")):
            batch = self._refill_upfront(trainer, inputs, g, trl_generate)
        else:
            batch = self._scored(trainer, inputs, trl_generate)
            if cfg.refill and internals.NUM_ITEMS in batch and not any(
                    batch.get(k) is not None for k in internals.MULTIMODAL_KEYS):
                batch = self._refill(trainer, inputs, batch, g, trl_generate)
        if batch[internals.ADVANTAGES].shape[0] % g == 0:  # several processes may split a group: then it is not logged
            internals.log_metric(trainer, "grpokit/signal_groups",
                                 float(group_signal(batch[internals.ADVANTAGES], g).float().mean()))
        for band, share in self.selector.rates.shares().items():
            internals.set_metric(trainer, f"grpokit/bands/{band}", share)
        return batch

    def _refill_picks(self, trainer, inputs, g: int):
        """Up to refill_max_rounds lists of `groups` dataset indices for this process, one per refill round
        (chosen like the sampler's, or uniformly when selection is off), none of them a prompt of this step on
        any process or of an earlier round; stops early when the dataset has too few unused prompts left for a
        full round.

        With several processes, every process draws the same picks for all of them (the estimates are updated
        from the gathered rewards, so they agree; the generator is seeded by the step and round alone) and takes
        its own slice: the processes refill different prompts and run the same number of rounds, as each round's
        generation gathers across them."""
        groups, processes, rank = len(inputs) // g, trainer.accelerator.num_processes, trainer.accelerator.process_index
        prompts, _ = internals.generation_rewards(trainer, len(inputs) * processes)  # this step's, every process's
        used = {i for p in prompts for i in self.selector.by_key.get(prompt_key(p), [])}
        for round_ in range(1, self.selector.config.refill_max_rounds + 1):
            rng = self.selector.rng("refill", trainer.state.global_step, round_)
            want = groups * processes
            if self.selector.config.enabled:
                picked = self.selector.pick(want, rng, exclude=used)
            else:
                free = [i for i in range(len(self.selector)) if i not in used]
                picked = rng.sample(free, min(want, len(free)))
            if len(picked) < want:
                return
            used |= set(picked)
            yield picked[rank * groups:(rank + 1) * groups]

    @staticmethod
    def _rows(trainer, picked: list[int], g: int) -> list[dict]:
        return [dict(trainer.train_dataset[i]) for i in picked for _ in range(g)]

    def _refill(self, trainer, inputs, batch, g: int, trl_generate):
        parts = [(batch, group_signal(batch[internals.ADVANTAGES], g))]
        groups, have = len(inputs) // g, int(parts[0][1].sum())
        picks = self._refill_picks(trainer, inputs, g)
        # any_rank: every process runs the same rounds (each one's generation gathers across them)
        while any_rank(have < groups) and (picked := next(picks, None)) is not None:
            extra = self._scored(trainer, self._rows(trainer, picked, g), trl_generate)
            parts.append((extra, group_signal(extra[internals.ADVANTAGES], g)))
            have += int(parts[-1][1].sum())
        return self._keep_signal(trainer, parts, groups, g, rounds=len(parts) - 1)

    def _refill_upfront(self, trainer, inputs, g: int, trl_generate):
        """selection.refill_upfront: the refill groups are generated in the same call as the step's own."""
        picks = list(self._refill_picks(trainer, inputs, g))
        rows = list(inputs) + [row for picked in picks for row in self._rows(trainer, picked, g)]
        batch = self._scored(trainer, rows, trl_generate)
        return self._keep_signal(trainer, [(batch, group_signal(batch[internals.ADVANTAGES], g))], len(inputs) // g,
                                 g, len(picks))

    def _keep_signal(self, trainer, parts, groups: int, g: int, rounds: int):
        """A batch of `groups` groups out of `parts` ((batch, has-signal per group)): the groups with a spread
        first (the step's own, then the refills'), tied ones of the step's own (the first `groups` of part 0)
        fill what is missing. Logs the refill metrics; with no refill round, part 0 is the step's batch as is."""
        chosen = [(p, j) for p, (b, keep) in enumerate(parts) for j in range(len(keep)) if keep[j]]
        tied = [(0, j) for j in range(groups) if not parts[0][1][j]]
        chosen = (chosen + tied)[:groups]
        discarded = 0
        for p, (b, keep) in enumerate(parts):
            kept = {j for q, j in chosen if q == p}
            rows = [r for j in range(len(keep)) if j not in kept for r in range(j * g, (j + 1) * g)]
            discarded += int(b[internals.COMPLETION_MASK][rows].sum()) if rows else 0
        internals.log_metric(trainer, "grpokit/refill/rounds", rounds)
        internals.log_metric(trainer, "grpokit/refill/extra_groups", rounds * groups)
        internals.log_metric(trainer, "grpokit/refill/discarded_tokens", discarded)
        if rounds == 0:
            return parts[0][0]
        index = [(p, torch.tensor([r for q, j in chosen if q == p for r in range(j * g, (j + 1) * g)], dtype=torch.long))
                 for p in range(len(parts))]
        merged = merge_rows([(parts[p][0], rows) for p, rows in index if rows.numel()], internals.pad_token_id(trainer))
        # TRL's normaliser counts the whole generation batch, every process's tokens (gathered, then summed)
        merged[internals.NUM_ITEMS] = trainer.accelerator.gather(merged[internals.NUM_ITEMS].reshape(1)).sum()
        return merged

    # -- resume: the estimates travel with each checkpoint
    def saved(self, trainer, folder: str) -> None:
        if trainer.args.should_save:
            self.selector.save(folder)

    def load(self, checkpoint: Path) -> None:
        self.selector.load(checkpoint)


def selection_of(recipe, dataset, processes: int, preflight_file: Path | None = None) -> Selection:
    """A trainer's selection part for a recipe: estimates over `dataset` (TRL's prompt dataset), seeded from
    preflight_file when it exists; refused (selection.check_processes) when `processes` cannot each hold whole
    groups."""
    cfg = recipe.selection
    g = batch_geometry(recipe.train, recipe.trl, processes)
    check_processes(cfg, g.processes, g.per_process, g.group)

    roles = reward_roles(recipe.rewards)  # {logged name: role}, in the recipe's order
    names = dict(zip(roles, (r.weight for r in recipe.rewards)))
    correctness = next((n for n, role in roles.items() if role == "correctness"), None)
    questions = dataset["question"] if "question" in dataset.column_names else None
    selector = Selector(cfg, list(dataset["prompt"]), questions, recipe.train.seed, correctness, names)
    if preflight_file is not None and Path(preflight_file).is_file():
        selector.seed_from_preflight(preflight_file)
    return Selection(selector)
