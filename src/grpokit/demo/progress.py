"""A comparison's stages kept across a stop: what finished (progress.json), so `--resume` goes on from there.

    progress = Progress(out, recipes_identity(recipes, overrides), resume, again)
    stages = Stages(dirs, progress); stages.run("sft", lambda: train_sft(...), steps)

A part is recorded once it finished, checked against its kind's schema when read back; a part edited into another
shape is named with file, part and field and done again.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

from grpokit.errors import GrpokitError, Problem
from grpokit.run import RunDir, run_end
from grpokit.run.writer import write_file

PROGRESS_FILE = "progress.json"  # a comparison's finished parts, in its folder (`Progress`)


def recipes_identity(recipes, overrides) -> dict:
    """What a comparison was run with, as `Progress` compares it: each recipe as loaded (`--set` applied: a
    fingerprint of every value, so an edited recipe file is a different comparison) and the `--set` given."""
    import hashlib

    dumped = json.dumps([r.model_dump(mode="json") for r in recipes], sort_keys=True, default=str)
    return {"recipes": hashlib.sha256(dumped.encode()).hexdigest()[:16], "overrides": list(overrides or [])}


def _part_schemas() -> list[tuple[str, type]]:
    """(key prefix, pydantic model) of each kind of part a comparison records: what its resumed use reads, strictly
    (a number is a number, not "abc" nor "12"); extra keys are allowed."""
    import dataclasses
    import typing

    from pydantic import BaseModel, ConfigDict, Field, create_model

    from grpokit.evaluation.evaluate import EvalResult

    strict = ConfigDict(strict=True, extra="allow")
    hints = typing.get_type_hints(EvalResult)
    eval_set = create_model("EvalSet", __config__=strict, **{
        f.name: (hints[f.name], ... if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
                 else None) for f in dataclasses.fields(EvalResult)})

    class End(BaseModel):
        model_config = strict
        status: str

    class Training(BaseModel):
        model_config = strict
        seconds: float = Field(ge=0)
        end: End

    class Evaluation(BaseModel):
        model_config = strict
        path: str
        sets: dict[str, eval_set]  # type: ignore[valid-type]
        retention: eval_set | None = None  # type: ignore[valid-type]

    class Mined(BaseModel):
        model_config = strict
        rows: int
        solutions: int
        right_samples: int
        rows_solved: int

    class Mining(BaseModel):
        model_config = strict
        mined: Mined
        seconds: float = Field(ge=0)

    return [("training ", Training), ("evaluation of ", Evaluation), ("RFT mining", Mining)]


def _part_problem(key: str, value) -> str | None:
    """Why a recorded part cannot be read as its kind is (a value edited by hand: `"seconds": "abc"`, a part's
    `sets` missing): "parts['training sft'].seconds: Input should be a valid number (found 'abc')"; None."""
    from pydantic import ValidationError

    schema = next((m for prefix, m in _part_schemas() if str(key).startswith(prefix)), None)
    if schema is None:  # another part: its `still_there` decides (by default: a JSON object, else done again)
        return None
    try:
        schema.model_validate(value)
    except ValidationError as e:
        err = e.errors()[0]
        field = "".join(f".{x}" for x in err["loc"])
        return f"parts[{str(key)!r}]{field}: {err['msg']} (found {str(err.get('input'))[:60]!r})"
    return None


class Progress:
    """The parts of a comparison finished so far (each training, the RFT mining, each model's figures, the matched
    retention), kept in `progress.json` in its folder as each ends, so that `grpokit demo --task ... --resume` goes
    on where a stopped or killed comparison was (hours on a CPU) instead of starting over.

    The parts are a sequence: a resumed comparison keeps the longest finished start of it and does the rest, so a
    part done again (its run folder gone, say) is never followed by a figure measured on what it replaced. Resuming
    is refused, before any model loads, where the folder holds no progress record or one written with other recipes
    or `--set` (`recipes_identity`). Without `--resume` the record starts empty: a comparison starts over."""

    def __init__(self, folder: Path, identity: dict, resume: bool, again: str):
        self.path, self.identity, self.again = folder / PROGRESS_FILE, identity, again
        self.parts: dict = {}
        self.kept: list[str] = []  # the parts taken from the earlier invocation, in order
        self._used = 0  # how many recorded parts this invocation has consumed so far
        self._diverged = not resume
        if resume:
            from grpokit.run.files import read_json

            record = read_json(self.path, note=lambda _: None)
            fix = f"run `{again}` without --resume to start the comparison over (it replaces this one)"
            if not isinstance(record, dict) or not isinstance(record.get("parts"), dict):
                raise GrpokitError([Problem(str(self.path), "no readable progress record: there is no stopped "
                                            "comparison here to go on with", fix)])
            if record.get("identity") != identity:
                was = record.get("identity") or {}
                raise GrpokitError([Problem(str(folder), "its comparison ran with other recipes or --set (it ran with "
                                            f"--set {' '.join(was.get('overrides') or []) or 'nothing'}; recipes "
                                            f"{was.get('recipes')}, now {identity['recipes']})",
                                            "resume with the same recipes and --set, or " + fix)])
            self.parts = record["parts"]

    def start(self) -> None:
        """Write the record as it stands (once the folder is claimed): empty unless resuming."""
        self._save()

    def _save(self) -> None:
        write_file(self.path, json.dumps({"identity": self.identity, "parts": self.parts}, indent=1),
                   within=self.path.parent, replace=True)

    def _holds(self, key: str, still_there) -> bool:
        why = _part_problem(key, self.parts[key])
        if why is not None:  # not the shape grpokit recorded: said, file and field, and done again
            from grpokit.run.files import note

            note(f"{self.path} {why}: not what grpokit recorded for this part, so it is done again")
            return False
        try:
            return bool(still_there(self.parts[key]))
        except (KeyError, TypeError, AttributeError):  # a record edited by hand into another shape: done again
            return False

    def once(self, key: str, fn, still_there=lambda value: isinstance(value, dict)):
        """The part `key`: its recorded value where this comparison is still on its earlier path and
        `still_there(value)` (what it made is still on disk; by default: the value has the shape of a part), else
        `fn()`, recorded before it is returned."""
        from grpokit.console import console

        if not self._diverged and key in self.parts and self._holds(key, still_there):
            self._used += 1
            self.kept.append(key)
            console.print(f"{key}: kept from the stopped comparison ({self.path.name})", markup=False)
            return self.parts[key]
        if not self._diverged:  # from here on everything is done again: drop what followed
            self._diverged = True
            self.parts = dict(list(self.parts.items())[:self._used])
        value = fn()
        self.parts[key] = value
        self._save()
        return value


class Stages:
    """The training stages of a comparison (sft_vs_grpo, composition), each run by `run`: its seconds and its end
    (grpokit.run.run_end), both kept in `progress` so that a resumed comparison skips a finished stage whose run
    folder still says so; a stage the user stopped stops the comparison."""

    def __init__(self, dirs: dict[str, Path], progress: Progress):
        self.dirs, self.progress = dirs, progress
        self.seconds: dict[str, float] = {}
        self.ends: dict[str, dict] = {}

    def run(self, name: str, fn, max_steps: int) -> dict:
        """`fn()` (a training: its TrainResult) as the stage `name`, whose run folder is dirs[name]; its end."""
        from grpokit.console import console

        def train() -> dict:
            console.print(f"[bold]{name}[/] -> {self.dirs[name]}")
            t0 = time.time()
            try:
                summary = fn().summary  # a TrainResult (train, train_sft): the trained model is not kept
            except GrpokitError as e:  # the training's own problems, then what the comparison keeps of itself
                raise GrpokitError([*e.problems, Problem(str(self.dirs[name]), f"the comparison stopped in its {name} "
                                                         "stage: the stages before it are kept",
                                                         f"once that is fixed, `{self.progress.again} --resume` goes "
                                                         "on from this stage")],
                                   exit_code=e.exit_code, title=e.title) from None
            end = run_end(summary, max_steps)
            if summary.get("status") == "interrupted":
                raise GrpokitError([Problem(str(self.dirs[name]), "stopped by the user: the stages before it are "
                                            "kept, nothing was compared yet",
                                            f"run `{self.progress.again} --resume` to go on from this stage")],
                                   exit_code=1)
            return {"seconds": time.time() - t0, "end": end}

        def still_there(done: dict) -> bool:  # the run folder still holds the run that finished
            return float(done["seconds"]) >= 0 and RunDir(self.dirs[name]).read_status().get("status") == \
                done["end"]["status"]

        done = self.progress.once(f"training {name}", train, still_there)
        self.seconds[name] = done["seconds"]
        self.ends[name] = done["end"]
        return done["end"]
