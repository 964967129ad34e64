"""The data checks of `recipe check`: the files exist and are a format data check reads, the rows read as training
reads them (enough usable ones for a step, own rewards called on every row), and `hf:` datasets on the hub.

Each check returns `(location, what, fix)` triples, as grpokit.recipe.checks does.
"""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from grpokit.data import resolve_data_path, split_rows
from grpokit.data.load import read_args
from grpokit.errors import GrpokitError
from grpokit.families import family_of
from grpokit.recipe.checks import Found
from grpokit.templates import PromptTemplate


def check_data(d, base: Path, rewards=None) -> Found:
    """The data files exist; a missing one's fix names the command that makes one for the recipe's task family
    (`Family.make_data`; the set-up lines of README.md "Set-up on a fresh machine")."""
    family = family_of(rewards or [])
    make = family.make_data if family is not None else None
    out: Found = []
    for key in ("train", "eval"):
        spec = getattr(d, key)
        if spec is None or spec.startswith("hf:"):
            continue
        path = Path(resolve_data_path(spec, base))
        if not path.is_file():
            out.append((("data", key), f"file not found: {path}",
                        "fix the path (relative paths are resolved from the recipe's folder), or create it"
                        + (f", e.g. {make}" if make else "")))
    return out


def check_prompt_lengths(d, m, t, trl: dict | None, tools, report) -> tuple[Found, list[str]]:
    """train.max_prompt_length against the prompts training builds from data.train's rows, counted with the model's
    tokenizer as training counts them (grpokit.recipe.trl_args.prompt_tokens), on the rows it trains on (the
    eval share split off as training splits it): an error when fewer than one generation round fit (TRL would
    make no step; the run would "complete" at step 0), a note with how many survive when some are dropped."""
    if report is None or not report.rows or t is None or m is None or d is None:
        return [], []
    from grpokit.models import load_recipe_tokenizer
    from grpokit.recipe.trl_args import batch_geometry, prompt_tokens
    try:
        tokenizer = load_recipe_tokenizer(m)
    except (GrpokitError, OSError, ValueError):
        return [], []  # the model check says why it cannot be read
    template = PromptTemplate(d.template, d.system_prompt, m.enable_thinking)
    rows = report.rows
    if d.eval is None and d.eval_fraction > 0:
        rows = split_rows(rows, d.eval_fraction, d.shuffle_seed)[0]
    fit = sum(prompt_tokens(template, tokenizer, template.build(r["question"]), tools) <= t.max_prompt_length
              for r in rows)
    need = batch_geometry(t, trl or {}).prompts_per_round
    dropped = len(rows) - fit
    if fit < need:
        return [(("train", "max_prompt_length"), f"{dropped} of the {len(rows)} training prompts are longer than "
                 f"{t.max_prompt_length} tokens, so {fit} remain: fewer than one generation round takes ({need}); "
                 "TRL would make no step of them",
                 "raise train.max_prompt_length (the longest prompt is in `grpokit data check`), or shorten the "
                 "questions")], []
    if dropped:
        return [], [f"train.max_prompt_length: {dropped} of {len(rows)} training prompts are longer than "
                    f"{t.max_prompt_length} tokens and are dropped; {fit} remain"]
    return [], []


_MAX_DATA_PROBLEMS = 5  # grouped already ("40 rows: missing question"); `grpokit data check` lists every one


def check_data_rows(d, base: Path, rewards, t, trl: dict | None):
    """The rows training will read, read as training reads them (grpokit.data.load.read_args), and whether one
    step can be made of them: (problems, the report of data.train's rows or None when it is not read here)."""
    from grpokit.data import check_file, grouped, resolve_data_path
    from grpokit.recipe.trl_args import batch_geometry

    args = read_args(SimpleNamespace(data=d, rewards=rewards or []))
    out: Found = []
    train_report = None
    for key, split in (("train", d.train_split), ("eval", d.eval_split or "test")):
        spec = getattr(d, key)
        if spec is None or spec.startswith("hf:"):
            continue
        path = resolve_data_path(spec, base)
        if not Path(path).is_file():
            continue  # check_data says so
        report = check_file(path, split=split, **args)
        if key == "train":
            train_report = report
        errors = grouped(report.errors)
        if report.fatal or (errors and not d.skip_bad_rows) or not report.rows:
            skip = (f"; or set data.skip_bad_rows: true to train on the {len(report.rows)} usable one(s)"
                    if report.rows and not report.fatal else "")
            for p in errors[:_MAX_DATA_PROBLEMS]:
                out.append((("data", key), f"{p.where.replace(path, spec, 1)}: {p.message}", p.fix + skip))
            if len(errors) > _MAX_DATA_PROBLEMS:
                out.append((("data", key), f"... and {len(errors) - _MAX_DATA_PROBLEMS} more problem(s)",
                            f"`grpokit data check {spec}` lists every one"))
            if not report.rows and not errors:
                out.append((("data", key), f"{spec} has no usable rows", f"`grpokit data check {spec}`"))
    if train_report is None or not train_report.rows or out or t is None:
        return out, train_report
    n = len(train_report.rows)
    held = 0
    if d.eval is None and d.eval_fraction > 0:  # the eval share is split off data.train (grpokit.data.split_rows)
        held = max(1, int(round(n * d.eval_fraction)))
    g = batch_geometry(t, trl)  # TRL's RepeatSampler drops a last chunk smaller than a round: no step at all
    if n - held < g.prompts_per_round:
        split = f" ({n} usable, {held} held out for eval by data.eval_fraction {d.eval_fraction})" if held else ""
        out.append((("data", "train"), f"{n - held} usable row(s) to train on{split}, fewer than one step needs: "
                    f"{g.prompts_per_round} prompts ({g.round_source()} / num_generations {t.num_generations}, on "
                    "one process; N processes need N times as many); TRL would make no step of them",
                    "add rows, or lower train.per_device_train_batch_size or gradient_accumulation_steps (keeping "
                    "their product a multiple of num_generations)" + (", or give data.eval" if held else "")))
    return out, train_report



def check_hub_data(d) -> tuple[Found, list[str]]:
    """`hf:` datasets: looked up on the hub when it is reachable (one request); a note when it is not."""
    from grpokit.hub_access import hub_dataset_problem

    out: Found = []
    notes: list[str] = []
    for key in ("train", "eval"):
        spec = getattr(d, key)
        if spec is None or not spec.startswith("hf:"):
            continue
        problem, note = hub_dataset_problem(spec[3:])
        if problem:
            out.append((("data", key), *problem))
        if note:
            notes.append(f"data.{key} {spec}: {note}")
    return out, notes
