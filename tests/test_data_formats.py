"""Data formats (.jsonl/.json/.csv/.parquet), hostile files with exact line numbers, conversational prompts."""
from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from conftest import write_jsonl

from grpokit.cli import main
from grpokit.data.io import check_file, load_rows
from grpokit.families import FAMILIES
from grpokit.errors import GrpokitError
from grpokit.templates import PromptTemplate

OK = b'{"question": "q1", "answer": "1"}\n'

# (id, file bytes, expected errors as (where suffix, substring), unusable rows counted)
HOSTILE_JSONL = [
    # one bad byte costs its own line only, and is named by it
    ("bad byte", OK + b'{"question": "q\xff2", "answer": "2"}\n' + OK.replace(b"q1", b"q3"), [(":2", "not UTF-8: byte 0xff")], 1),
    # U+2028 / U+2029 / U+0085 inside valid JSON strings: str.splitlines would split there and shift line 3
    ("line separators", '{"question": "a\u2028b\u2029c\x85d", "answer": "1"}\n'.encode() + OK + b"nope\n",
     [(":3", "invalid JSON")], 1),
    # Windows line endings are one line each
    ("crlf", OK.replace(b"\n", b"\r\n") + b"nope\r\n", [(":2", "invalid JSON")], 1),
    ("NaN answer", OK + b'{"question": "q2", "answer": NaN}\n', [(":2 answer", "answer is NaN")], 1),
    ("Infinity answer", OK + b'{"question": "q2", "answer": -Infinity}\n', [(":2 answer", "infinite")], 1),
    ("1e400 answer", OK + b'{"question": "q2", "answer": 1e400}\n', [(":2 answer", "infinite")], 1),
    # {} misses both fields: two problems, one unusable row
    ("empty object", OK + b"{}\n", [(":2", "missing question"), (":2", "missing answer")], 1),
    ("no final newline", OK + b'{"question": "q2"}', [(":2", "missing answer")], 1),
]


@pytest.mark.parametrize("content,expected,unusable", [c[1:] for c in HOSTILE_JSONL], ids=[c[0] for c in HOSTILE_JSONL])
def test_hostile_jsonl_names_the_exact_line(tmp_path, content, expected, unusable):
    path = tmp_path / "d.jsonl"
    path.write_bytes(content)
    report = check_file(path)
    assert [(e.where, e.message) for e in report.errors] and not report.fatal
    for (suffix, text), err in zip(expected, report.errors, strict=True):
        assert err.where == f"{path}{suffix}" and text in err.message and err.fix
    assert report.unusable == unusable and f"{unusable} unusable" in report.summary()
    # skip_bad_rows drops exactly the bad lines, never the file
    rows, _ = load_rows(str(path), skip_bad_rows=True)
    assert len(rows) == len(report.rows) >= 1


def test_bad_byte_line_is_skipped_alone(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_bytes(OK + b'{"question": "q\xff2", "answer": "2"}\n' + b'{"question": "q3", "answer": "3"}\n')
    rows, report = load_rows(str(path), skip_bad_rows=True)
    assert [r["question"] for r in rows] == ["q1", "q3"] and report.unusable == 1


# (id, file name, bytes, expected where suffix, substring): the whole file is unusable, skip_bad_rows or not
FATAL_FILES = [
    ("empty jsonl", "d.jsonl", b"", "", "file is empty"),
    ("blank-only jsonl", "d.jsonl", b"\n  \n\t\n", "", "only blank lines"),
    ("empty csv", "d.csv", b"", "", "file is empty"),
    ("header-only csv", "d.csv", b"question,answer\n", "", "no rows below the header"),
    ("csv missing column", "d.csv", b"question,solution\na,1\n", "", "no answer column"),
    ("csv bad byte", "d.csv", b"question,answer\na,1\nb\xfe,2\n", ":3", "not UTF-8: byte 0xfe"),
    ("not parquet", "d.parquet", b"question,answer\na,1\n", "", "not a readable Parquet file"),
    ("empty parquet", "d.parquet", b"", "", "file is empty"),
    ("json syntax", "d.json", b'[{"question": "a", "answer": 1},\n {"question": "b" "answer": 2}]', ":2", "invalid JSON"),
    ("empty json array", "d.json", b"[]", "", "array is empty"),
    ("unknown format", "d.txt", b"question,answer\n", "", "unknown data format '.txt'"),
]


@pytest.mark.parametrize("name,content,suffix,text", [c[1:] for c in FATAL_FILES], ids=[c[0] for c in FATAL_FILES])
def test_unusable_files_are_refused_with_where_and_fix(tmp_path, capsys, name, content, suffix, text):
    path = tmp_path / name
    path.write_bytes(content)
    report = check_file(path)
    assert report.fatal and not report.rows
    (err,) = report.errors
    assert err.where == f"{path}{suffix}" and text in err.message and err.fix
    with pytest.raises(GrpokitError) as exc:  # training refuses it even when told to skip bad rows
        load_rows(str(path), skip_bad_rows=True)
    assert exc.value.exit_code == 1 and text in str(exc.value.problems[0].message)
    assert main(["data", "check", str(path)]) == 1
    assert text in capsys.readouterr().out


def test_csv_rows_carry_their_line_numbers(tmp_path):
    path = tmp_path / "d.csv"
    path.write_bytes(b'question,answer\n"two\nlines",007\n\nb,2,3\nc,\n"d, e",3.50\n')
    report = check_file(path)
    assert [(e.where, e.message) for e in report.errors] == [
        (f"{path}:5", "3 cells, but the header has 2"),  # header = line 1; the quoted cell spans lines 2-3
        (f"{path}:6 answer", "answer is empty"),
    ]
    assert [w.where for w in report.warnings] == [f"{path}:4"]  # the blank line
    # cells stay text: "007" and "3.50" are what the file says, not 7 and 3.5
    assert [(r["question"], r["answer"]) for r in report.rows] == [("two\nlines", "007"), ("d, e", "3.50")]


# (id, numeric task?, answer, warned?)
NUMERIC_CASES = [
    ("plain number", True, "72", False),
    ("gsm8k gold", True, "48 + 24 = 72\n#### 72", False),
    ("thousands and currency", True, "$1,234.50", False),
    ("json number", True, 3, False),
    ("words", True, "seventy-two", True),
    ("string nan", True, "nan", True),  # float("nan") parses, but no completion matches it
    ("not a numeric task", False, "seventy-two", False),
]


@pytest.mark.parametrize("numeric,answer,warned", [c[1:] for c in NUMERIC_CASES], ids=[c[0] for c in NUMERIC_CASES])
def test_non_numeric_answers_warned_on_numeric_tasks(tmp_path, numeric, answer, warned):
    path = write_jsonl(tmp_path / "d.jsonl", [{"question": "q1", "answer": "1"}, {"question": "q2", "answer": answer}])
    report = check_file(path, family=FAMILIES["math"] if numeric else None)
    assert report.ok and len(report.rows) == 2
    assert report.flagged_answers == ([f"{path}:2"] if warned else [])
    assert any("not a number" in w.message for w in report.warnings) == warned


def test_data_check_task_math_flag(tmp_path, capsys):
    path = write_jsonl(tmp_path / "d.jsonl", [{"question": "q", "answer": "seventy"}])
    assert main(["data", "check", str(path), "--task", "math"]) == 0  # a warning, not an error
    assert f"warning {path}:1: answer 'seventy' is not a number" in capsys.readouterr().out


ROWS = [
    {"question": "What is 2 + 3?", "answer": "5", "source": "a"},
    {"question": "Déjà vu: 10 - 4?", "answer": 6, "source": "b"},
    {"question": "Half of 7?", "answer": 3.5, "source": "c"},
]
EXPECTED = [{"question": r["question"], "answer": str(r["answer"]), "source": r["source"]} for r in ROWS]


@pytest.mark.parametrize("suffix", [".jsonl", ".json", ".csv", ".parquet"])
def test_round_trip_through_every_format(tmp_path, suffix):
    import pandas as pd

    df = pd.DataFrame(ROWS).astype({"answer": str})  # one type per column, as a table tool would write it
    path = tmp_path / f"d{suffix}"
    {".jsonl": lambda: df.to_json(path, orient="records", lines=True, force_ascii=False),
     ".json": lambda: df.to_json(path, orient="records", force_ascii=False),
     ".csv": lambda: df.to_csv(path, index=False),
     ".parquet": lambda: df.to_parquet(path)}[suffix]()
    report = check_file(path)
    assert report.ok and report.rows == EXPECTED
    rows, _ = load_rows(str(path))
    assert rows == EXPECTED


def test_datasets_written_parquet_with_numbers_and_messages(tmp_path):
    from datasets import Dataset

    path = tmp_path / "d.parquet"
    Dataset.from_list([{"prompt": [{"role": "user", "content": "2+3?"}], "answer": 5},
                       {"prompt": [{"role": "user", "content": "4+4?"}], "answer": 8}]).to_parquet(str(path))
    report = check_file(path, template="chat")
    assert report.ok and report.conversational == 2
    assert report.rows[0] == {"question": [{"role": "user", "content": "2+3?"}], "answer": "5"}
    assert [e.where for e in check_file(path, template="plain_en").errors] == [f"{path} row 1 prompt", f"{path} row 2 prompt"]


U = {"role": "user", "content": "What is 2 + 3?"}
# (id, question as a message list, expected substring of the error or None)
MESSAGE_CASES = [
    ("user only", [U], None),
    ("own system prompt", [{"role": "system", "content": "Be brief."}, U], None),
    ("few-shot turns", [U, {"role": "assistant", "content": "5"}, {"role": "user", "content": "And 3 + 4?"}], None),
    ("empty list", [], "message list is empty"),
    ("not a message", ["hi"], "not a message"),
    ("unknown role", [{"role": "human", "content": "hi"}], "unknown role 'human'"),
    ("content parts", [{"role": "user", "content": [{"type": "text", "text": "hi"}]}], "content must be a string"),
    ("system message not first", [U, {"role": "system", "content": "s"}, U], "system message after the first"),
    ("ends with the assistant", [U, {"role": "assistant", "content": "5"}], "last message is from 'assistant'"),
    ("empty user text", [{"role": "user", "content": "  "}], "every user message is empty"),
]


@pytest.mark.parametrize("messages,expected", [c[1:] for c in MESSAGE_CASES], ids=[c[0] for c in MESSAGE_CASES])
def test_conversational_prompts_are_validated(tmp_path, messages, expected):
    path = write_jsonl(tmp_path / "d.jsonl", [{"prompt": messages, "answer": "5"}])
    report = check_file(path, template="chat")
    if expected is None:
        assert report.ok and report.rows[0]["question"] == messages and report.conversational == 1
    else:
        (err,) = report.errors
        assert err.where.startswith(f"{path}:1 prompt") and expected in err.message and err.fix


@pytest.mark.parametrize("template", ["plain_en", "plain_zh"])
def test_plain_template_refuses_message_lists_with_the_fix(tmp_path, capsys, template):
    path = write_jsonl(tmp_path / "d.jsonl", [{"question": "1+1?", "answer": "2"}, {"question": [U], "answer": "5"}])
    assert main(["data", "check", str(path), "--template", template]) == 1
    out = capsys.readouterr().out
    assert f"{path}:2 question: the question is a list of messages; the {template} template" in out
    assert "set data.template: chat" in out
    assert main(["data", "check", str(path), "--template", "chat"]) == 0
    with pytest.raises(ValueError, match="use template: chat"):
        PromptTemplate(template).build([U])


def _trl_prompt_ids(tokenizer, prompts, chat_template_kwargs):
    """TRL's own GRPOTrainer prompt tokenisation, run on just the attributes it reads."""
    from trl import GRPOTrainer

    trainer = SimpleNamespace(_is_vlm=False, environment_factories=None, processing_class=tokenizer,
                              chat_template=None, tools=None, chat_template_kwargs=chat_template_kwargs)
    return [list(ids) for ids in GRPOTrainer._tokenize_prompts(trainer, prompts)[0]]


def test_conversational_rows_render_as_trl_tokenises_them(tiny_qwen3_dir):
    from grpokit.models import load_tokenizer
    from grpokit.recipe.trl_args import build_prompt_dataset

    tok = load_tokenizer(str(tiny_qwen3_dir))
    template = PromptTemplate("chat", system_prompt="Recipe system.", enable_thinking=False)
    own_system = [{"role": "system", "content": "Row system."}, U]
    rows = [{"question": "Plain 1 + 1?", "answer": "2"},  # a string question in the same file as message lists
            {"question": [U], "answer": "5"},
            {"question": own_system, "answer": "5"}]
    dataset, dropped = build_prompt_dataset(rows, template, tok, 512)
    prompts = [dataset[i]["prompt"] for i in range(3)]
    assert dropped == 0 and [dataset[i]["question"] for i in range(3)] == [r["question"] for r in rows]
    # the recipe's system prompt is added only where the row has none; the row's own one is kept as given
    assert prompts[1] == [{"role": "system", "content": "Recipe system."}, U]
    assert prompts[2] == own_system
    expected = _trl_prompt_ids(tok, prompts, template.chat_template_kwargs())
    assert [template.encode(tok, p) for p in prompts] == expected
    text = template.render(tok, prompts[2])
    assert "Row system." in text and "Recipe system." not in text and text.endswith("<think>\n\n</think>\n\n")


def test_duplicate_conversations_and_overlap(tmp_path):
    from grpokit.data.io import overlapping_questions

    path = write_jsonl(tmp_path / "d.jsonl", [{"question": [U], "answer": "5"}, {"question": [U], "answer": "5"},
                                              {"question": U["content"], "answer": "5"}])
    report = check_file(path)
    assert report.duplicates == 1 and f"first at {path}:1" in report.warnings[0].message
    train, held = report.rows[:1], report.rows[1:]
    assert overlapping_questions(train, held) == [U["content"]]  # shown as the user's text
    assert json.dumps(report.rows[2]["question"]) == json.dumps(U["content"])  # a string question stays a string


def test_json_array_keeps_nan_apart_from_missing(tmp_path):
    path = tmp_path / "d.json"
    path.write_text('[{"question": "a", "answer": NaN},\n {"question": "b", "answer": 1e400},\n {"question": "c"},\n'
                    ' {"question": "d", "answer": 4}]')
    report = check_file(path)
    assert [(e.where, e.message.split(",")[0]) for e in report.errors] == [
        (f"{path} row 1 answer", "answer is NaN"),
        (f"{path} row 2 answer", "answer is infinite (Infinity"),
        (f"{path} row 3", "missing answer (looked for answer / expected_answer; the row has: question)"),
    ]
    assert [r["answer"] for r in report.rows] == ["4"]


def _recipe(tmp_path, data: dict, rewards=("math_correctness",)):
    import yaml

    from grpokit.recipe.load import load_recipe

    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump({"model": {"name": "default"}, "data": data,
                                    "rewards": [{"name": r} for r in rewards]}))
    return load_recipe(path)


# (id, data section, rows, rewards, expected error substring or expected note substring)
RECIPE_CASES = [
    ("plain template refuses messages", {"template": "plain_en"}, [{"question": [U], "answer": "5"}],
     ("math_correctness",), ("error", "the plain_en template renders a question string")),
    ("numeric task notes words", {"template": "chat"}, [{"question": "q", "answer": "five"}],
     ("math_correctness",), ("note", "1 answer(s) of d.jsonl are not numbers although math_correctness")),
    ("not a numeric task: no note", {"template": "chat"}, [{"question": "q", "answer": "five"}],
     ("format",), ("note", None)),
    ("empty file refused even with skip_bad_rows", {"skip_bad_rows": True}, [], ("math_correctness",),
     ("error", "file is empty")),
]


@pytest.mark.parametrize("data,rows,rewards,expected", [c[1:] for c in RECIPE_CASES], ids=[c[0] for c in RECIPE_CASES])
def test_training_data_is_checked_against_the_recipe(tmp_path, data, rows, rewards, expected):
    from grpokit.data.load import load_datasets

    write_jsonl(tmp_path / "d.jsonl", rows)
    recipe = _recipe(tmp_path, {"train": "d.jsonl", "eval": "d.jsonl", **data}, rewards)
    kind, text = expected
    if kind == "error":
        with pytest.raises(GrpokitError) as exc:
            load_datasets(recipe)
        assert text in " ".join(p.message for p in exc.value.problems)
    else:
        notes = load_datasets(recipe)[2]
        assert any(text in n for n in notes) if text else not any("not numbers" in n for n in notes)


def test_served_chat_template_gives_conversations_their_training_ids(tmp_path, tiny_qwen3_dir):
    from grpokit.export.checks import check_prompt_ids
    from grpokit.export.serving import serving_chat_template
    from grpokit.models import load_tokenizer

    tok = load_tokenizer(str(tiny_qwen3_dir))
    template = PromptTemplate("chat", system_prompt="Recipe system.", enable_thinking=False)
    hf = tmp_path / "hf"
    tok.save_pretrained(hf)
    (hf / "chat_template.jinja").write_text(serving_chat_template(tok, template), encoding="utf-8")
    questions = ["Plain 1 + 1?", [U], [{"role": "system", "content": "Row system."}, U]]
    (check,) = check_prompt_ids(tmp_path, template, tok, questions)
    assert check.ok, check.detail


def test_exclude_accepts_any_format_and_conversations(tmp_path):
    import pandas as pd

    from grpokit.families.math import generate

    first = generate(20, seed=5)
    csv_path = tmp_path / "train.csv"
    pd.DataFrame(first)[["question", "answer"]].to_csv(csv_path, index=False)
    chat = write_jsonl(tmp_path / "chat.jsonl", [{"question": [U], "answer": "5"}])
    out = tmp_path / "more.jsonl"
    assert main(["data", "generate", "arithmetic", str(out), "--rows", "20", "--seed", "5",
                 "--exclude", str(csv_path), "--exclude", str(chat)]) == 0
    made = {json.loads(line)["question"] for line in out.read_text().split("\n") if line}
    assert len(made) == 20 and not made & {r["question"] for r in first}


def test_one_training_step_on_a_mixed_conversational_json_file(tmp_path, tiny_qwen3_dir):
    import yaml

    rows = [{"prompt": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": f"{i} + 1?"}]}
            if i % 2 else {"prompt": f"{i} + 1?"} for i in range(8)]
    (tmp_path / "d.json").write_text(json.dumps([{**r, "answer": i + 1} for i, r in enumerate(rows)]))
    recipe = tmp_path / "r.yaml"
    recipe.write_text(yaml.safe_dump({
        "model": {"name": str(tiny_qwen3_dir)},
        "data": {"train": "d.json", "eval_fraction": 0.25, "template": "chat", "system_prompt": "Recipe."},
        "rewards": [{"name": "math_correctness"}, {"name": "format", "weight": 0.5}],
        "train": {"num_generations": 2, "per_device_train_batch_size": 4, "max_completion_length": 4,
                  "max_steps": 1, "save_steps": 1, "logging_steps": 1, "num_samples_logged": 4}}))
    run = tmp_path / "run"
    assert main(["train", str(recipe), "--output-dir", str(run), "--skip-audit"]) == 0
    prompts = [json.loads(line)["prompt"] for line in (run / "samples.jsonl").read_text().split("\n") if line]
    systems = {p[0]["content"] for p in prompts}  # TRL saw message lists; each row kept its own system prompt
    assert prompts and all(isinstance(p, list) for p in prompts) and systems <= {"Be brief.", "Recipe."}
