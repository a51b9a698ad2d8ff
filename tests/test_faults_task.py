"""A user's DC-PMI task on bad data or a bad config: one error naming task, document (or
file and line) and field when the task is built, never a score of the text "None", never a
``datasets`` traceback (issue 22). No model: the checks run when the task is built."""

from __future__ import annotations

import importlib.metadata
import json
import logging
import re
from pathlib import Path

import pytest
from helpers import load_quiz, quiz_yaml
from helpers import write_jsonl as write_rows

from lm_eval_dcpmi import data
from lm_eval_dcpmi.errors import DataError, DCPMIConfigError

GOOD = {"question": "What is snow?", "hint": "Colours.", "a": "white", "b": "black", "label": 0}
RECORDS = [
    GOOD,
    {"question": "Which animal barks?", "hint": "Pets.", "a": "a cat", "b": "a dog", "label": 1},
    {"question": "What is wet?", "hint": "Things.", "a": "water", "b": "sand", "label": 0},
]

FIELDS = {
    "doc_to_text": "Question: {{question}}\nAnswer:",
    "doc_to_choice": "{{[a, b]}}",
    "doc_to_target": "label",
    "domain_premise": "Answer:",
}


def task_text(data_file: Path, **fields) -> str:
    return quiz_yaml("quiz_bad", data_file, dcpmi=True, **{**FIELDS, **fields})


def without(record: dict, field: str) -> dict:
    return {k: v for k, v in record.items() if k != field}


def write_jsonl(folder: Path, records: list[dict], name: str = "quiz.jsonl") -> Path:
    return write_rows(folder / name, records)


def write_task(folder: Path, data_file: Path, **lines: str) -> None:
    """The task YAML with some of its lines replaced (``key="value"`` as YAML)."""
    text = task_text(data_file)
    for key, value in lines.items():
        kept = [line for line in text.splitlines() if not line.startswith(f"{key}:")]
        text = "\n".join(kept) + f"\n{key}: {value}\n"
    (folder / "quiz_bad.yaml").write_text(text)


def load(folder: Path, task: str = "quiz_bad"):
    return load_quiz(folder, task)


def refused(folder: Path) -> str:
    with pytest.raises(DCPMIConfigError) as caught:
        load(folder)
    message = str(caught.value)
    assert "\n" not in message
    return message


# ---- 1: a field missing from one record (None in the dataset) is not the text "None"


@pytest.mark.parametrize(
    ("field", "lines", "what"),
    [
        ("hint", {"domain_premise": '"{{hint}} Answer:"'}, "the domain premise"),
        ("question", {}, "doc_to_text"),
        ("b", {}, "doc_to_choice"),
        ("label", {}, "doc_to_target"),
        (
            "choices",
            {"doc_to_choice": "choices"},
            "doc_to_choice",
        ),
        ("hint", {"doc_to_target": '"{{ 0 if hint|length > 3 else 1 }}"'}, "doc_to_target"),
    ],
)
def test_a_null_field_a_template_uses_is_named(tmp_path, field, lines, what):
    records = [{**r, "choices": [r["a"], r["b"]]} for r in RECORDS]
    records[1] = without(records[1], field)  # the datasets library reads it as None
    write_task(tmp_path, write_jsonl(tmp_path, records), **lines)
    message = refused(tmp_path)
    assert message.startswith(f"task quiz_bad ({tmp_path}/quiz_bad.yaml), document 1: ")
    assert f"the field {field!r}" in message
    assert what in message
    assert "missing" in message


def test_a_null_field_no_template_uses_is_fine(tmp_path):
    records = [{**r, "extra": "x"} for r in RECORDS]
    records[2] = without(records[2], "extra")
    write_task(tmp_path, write_jsonl(tmp_path, records))
    task = load(tmp_path)
    assert task.eval_docs[2]["extra"] is None


def test_a_template_that_handles_a_null_field_is_fine(tmp_path):
    records = list(RECORDS)
    records[1] = without(records[1], "hint")
    premise = "\"{% if hint is not none %}{{hint}} {% endif %}{{ hint or '' }}Answer:\""
    write_task(tmp_path, write_jsonl(tmp_path, records), domain_premise=premise)
    task = load(tmp_path)
    assert task.domain_premise(task.eval_docs[1]) == "Answer:"
    assert task.domain_premise(task.eval_docs[0]) == "Colours. Colours.Answer:"


# ---- 6: a domain premise of whitespace only


@pytest.mark.parametrize("premise", ['"   "', '"\\n"', '"\\t \\n"'])
def test_whitespace_domain_premise_is_refused(tmp_path, premise):
    write_task(tmp_path, write_jsonl(tmp_path, RECORDS), domain_premise=premise)
    message = refused(tmp_path)
    assert message.startswith(f"task quiz_bad ({tmp_path}/quiz_bad.yaml): the domain premise ")
    assert "whitespace" in message


def test_domain_premise_rendering_whitespace_is_refused(tmp_path):
    premise = "\"{{ '\\n ' if label == 1 else 'Answer:' }}\""
    write_task(tmp_path, write_jsonl(tmp_path, RECORDS), domain_premise=premise)
    message = refused(tmp_path)
    assert message.startswith(f"task quiz_bad ({tmp_path}/quiz_bad.yaml), document 1: ")
    assert "only whitespace" in message


# ---- 9: an option of whitespace only


def test_whitespace_option_is_refused(tmp_path):
    records = list(RECORDS)
    records[2] = {**records[2], "b": "  "}
    write_task(tmp_path, write_jsonl(tmp_path, records))
    message = refused(tmp_path)
    assert message.startswith(f"task quiz_bad ({tmp_path}/quiz_bad.yaml), document 2: ")
    assert "option 1 is only whitespace" in message


# ---- 8: a JSON data file the datasets library cannot read


def good_line(record: dict = GOOD) -> str:
    return json.dumps(record) + "\n"


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (
            (good_line() * 2 + '{"question": "What is wet?", "ch\n' + good_line()).encode(),
            r"quiz\.jsonl:3: not valid JSON at column 30 \(Unterminated string",
        ),
        ((good_line() + '{"question": "x", "a"').encode(), r"quiz\.jsonl:2: not valid JSON"),
        (b"", r"quiz\.jsonl: the file is empty"),
        (b"\n  \n", r"quiz\.jsonl: the file is empty"),
        ((good_line() * 2).encode("utf-16"), r"quiz\.jsonl: UTF-16 text.*iconv -f UTF-16 -t UTF-8"),
        ((good_line() * 2).encode("utf-32"), r"quiz\.jsonl: UTF-32 text.*iconv -f UTF-32 -t UTF-8"),
        (
            good_line().encode() + b'{"question": "caf\xe9"}\n',
            r"quiz\.jsonl:2: not UTF-8 text \(byte 0xe9",
        ),
    ],
    ids=["truncated line", "truncated end", "empty", "blank", "UTF-16", "UTF-32", "Latin-1"],
)
def test_bad_json_data_file_is_one_line_naming_the_file(tmp_path, content, expected):
    path = tmp_path / "quiz.jsonl"
    path.write_bytes(content)
    write_task(tmp_path, path)
    message = refused(tmp_path)
    assert message.startswith(
        f"task quiz_bad ({tmp_path}/quiz_bad.yaml): dataset_kwargs.data_files: "
    )
    assert str(path) in message
    assert re.search(expected, message), message


def test_missing_json_data_file_is_one_line(tmp_path):
    write_task(tmp_path, tmp_path / "nowhere.jsonl")
    message = refused(tmp_path)
    assert f"{tmp_path}/nowhere.jsonl" in message
    assert "dataset_kwargs.data_files" in message


def test_bad_json_data_file_stops_dcpmi_run_with_one_line(tmp_path, capsys):
    from lm_eval_dcpmi import cli

    path = tmp_path / "quiz.jsonl"
    path.write_bytes((good_line() * 2).encode("utf-16"))
    write_task(tmp_path, path)
    argv = ["run", "--include_path", str(tmp_path), "--tasks", "quiz_bad", "--limit", "1"]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err  # after the datasets library's progress bars
    assert "Traceback" not in err
    assert err.splitlines()[-1] + "\n" == (
        f"dcpmi: task quiz_bad ({tmp_path}/quiz_bad.yaml): dataset_kwargs.data_files: {path}: "
        f"UTF-16 text (its byte-order mark says so), not UTF-8 ({path}); convert it with "
        "`iconv -f UTF-16 -t UTF-8` (the byte-order mark goes with it).\n"
    )


# ---- 9: UTF-16 and UTF-32 files of the plugin's own loaders


@pytest.mark.parametrize("encoding", ["utf-16", "utf-32", "utf-16-le", "utf-16-be"])
def test_utf16_file_is_told_to_convert_from_utf16(tmp_path, encoding):
    path = tmp_path / "h.jsonl"
    record = {"ctx": "A man sits. he", "endings": ["a", "b"], "label": 1}
    text = json.dumps(record) + "\n"
    bom = {"utf-16-le": b"\xff\xfe", "utf-16-be": b"\xfe\xff"}.get(encoding, b"")
    path.write_bytes(bom + text.encode(encoding))
    with pytest.raises(DataError) as caught:
        data.jsonl("h.jsonl", "hellaswag", data_dir=tmp_path)
    name = encoding[:6].upper()
    assert str(caught.value) == (
        f"h.jsonl: {name} text (its byte-order mark says so), not UTF-8 ({path}); convert it "
        f"with `iconv -f {name} -t UTF-8` (the byte-order mark goes with it)."
    )


# ---- 9: a UTF-8 byte-order mark is accepted by every loader (README and docs say so)

BOM = b"\xef\xbb\xbf"


def test_utf8_byte_order_mark_is_accepted_by_the_xml_and_race_loaders(tmp_path):
    item = (
        '<item id="1" asks-for="cause" most-plausible-alternative="1"><p>He drank.</p>'
        "<a1>He was thirsty.</a1><a2>It rained.</a2></item>"
    )
    (tmp_path / "copa").mkdir()
    text = f'<?xml version="1.0" encoding="UTF-8"?>\n<copa-corpus>{item}</copa-corpus>\n'
    (tmp_path / "copa" / "copa-dev.xml").write_bytes(BOM + text.encode())
    assert data.xml_items("copa/copa-dev.xml", "copa", data_dir=tmp_path)["test"][0]["p"] == (
        "He drank."
    )
    (tmp_path / "race").mkdir()
    article = {"article": "A.", "questions": ["Why?"], "options": [["a", "b"]], "answers": ["B"]}
    (tmp_path / "race" / "1.txt").write_bytes(BOM + json.dumps(article).encode())
    assert data.race_folder("race", "race", data_dir=tmp_path)["test"][0]["article"] == "A."


# ---- 9: --num_fewshot without a few-shot split draws from the evaluation split


def build_requests(task, shots: int) -> None:
    task.set_config(key="num_fewshot", value=shots)
    # lm-eval's own seed (simple_evaluate's fewshot_random_seed): without one the sampler
    # draws at random, and whether a document meets itself would be chance
    task.set_fewshot_seed(seed=1234)
    task.build_all_requests(limit=3, rank=0, world_size=1)


def test_fewshot_from_the_evaluation_split_warns_once(tmp_path, caplog):
    write_task(tmp_path, write_jsonl(tmp_path, RECORDS))
    task = load(tmp_path)
    with caplog.at_level(logging.WARNING):
        build_requests(task, 2)
        build_requests(task, 2)
    warnings = [r.getMessage() for r in caplog.records if "fewshot_split" in r.getMessage()]
    assert len(warnings) == 1, warnings
    assert warnings[0].startswith(f"quiz_bad ({tmp_path}/quiz_bad.yaml): num_fewshot 2 ")
    assert "evaluation split" in warnings[0]
    # what it warns of: under lm-eval 0.4.13 a document's own question is among its
    # examples (0.4.12's sampler leaves the document out of its own draw)
    if importlib.metadata.version("lm-eval") != "0.4.12":
        firsts = [i for i in task.instances if i.idx == 0]
        assert any(i.arguments[0].count(i.doc["question"]) > 1 for i in firsts)


def test_fewshot_from_a_split_of_its_own_does_not_warn(tmp_path, caplog):
    write_jsonl(tmp_path, RECORDS, "train.jsonl")
    files = {"train": str(tmp_path / "train.jsonl"), "test": str(tmp_path / "quiz.jsonl")}
    text = task_text(tmp_path / "quiz.jsonl", dataset_kwargs={"data_files": files})
    write_jsonl(tmp_path, RECORDS)
    (tmp_path / "quiz_bad.yaml").write_text(text + "fewshot_split: train\n")
    task = load(tmp_path)
    with caplog.at_level(logging.WARNING):
        build_requests(task, 1)
        build_requests(task, 0)
    assert not [r for r in caplog.records if "fewshot_split" in r.getMessage()]
    write_task(tmp_path, write_jsonl(tmp_path, RECORDS))
    task = load(tmp_path)
    with caplog.at_level(logging.WARNING):
        build_requests(task, 0)  # zero-shot: no examples at all
    assert not [r for r in caplog.records if "fewshot_split" in r.getMessage()]


# ---- a task name lm-eval cannot name a samples file after


def test_a_task_named_with_a_slash_is_refused_before_the_model(tmp_path, capsys):
    from lm_eval_dcpmi import cli

    write_task(tmp_path, write_jsonl(tmp_path, RECORDS), task="my/quiz_bad")
    argv = ["run", "--include_path", str(tmp_path), "--tasks", "my/quiz_bad", "--log_samples",
            "--output_path", str(tmp_path / "out")]  # fmt: skip
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.splitlines()[-1] == (
        f"dcpmi: task 'my/quiz_bad' ({tmp_path}/quiz_bad.yaml): lm-eval names the samples file "
        "after the task (samples_<task>_<date>.jsonl), so '/' in its name makes a path that "
        "cannot be written; name it without '/', e.g. task: my_quiz_bad"
    )
    assert not (tmp_path / "out").exists()


def test_any_task_named_with_a_slash_is_refused_when_built_with_log_samples(tmp_path, capsys):
    """lm-eval's own multiple-choice task (not a DC-PMI one) named like a path: refused when
    the tasks are built, not after the model scored it (lm-eval then fails to save its
    samples and only a results file is left)."""
    from lm_eval_dcpmi import cli

    plain = {key: value for key, value in FIELDS.items() if key != "domain_premise"}
    data_file = write_jsonl(tmp_path, RECORDS)
    (tmp_path / "quiz.yaml").write_text(quiz_yaml("my/quiz_dcpmi", data_file, **plain))
    argv = ["run", "--model", "dummy", "--include_path", str(tmp_path), "--tasks",
            "my/quiz_dcpmi", "--log_samples", "--output_path", str(tmp_path / "out")]  # fmt: skip
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.splitlines()[-1] == (
        f"dcpmi: task 'my/quiz_dcpmi' ({tmp_path}/quiz.yaml): lm-eval names the samples file "
        "after the task (samples_<task>_<date>.jsonl), so '/' in its name makes a path that "
        "cannot be written; name it without '/', e.g. task: my_quiz_dcpmi"
    )
    assert not (tmp_path / "out").exists()
    # without --log_samples lm-eval names no file after it: the task runs
    assert cli.main(argv[:-3]) == 0


# ---- warnings a task's author needs: a premise that knows the answer, look-alike options


def _warnings(caplog, words: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if words in r.getMessage()]


def test_a_domain_premise_that_reads_the_target_field_warns(tmp_path, caplog):
    write_task(tmp_path, write_jsonl(tmp_path, RECORDS),
               domain_premise='"The answer is {{ [a, b][label] }}."')  # fmt: skip
    with caplog.at_level(logging.WARNING):
        load(tmp_path)
    (warning,) = _warnings(caplog, "gives it away")
    assert warning.startswith(f"quiz_bad ({tmp_path}/quiz_bad.yaml): the domain premise ")
    assert "reads label, the field the target is read from" in warning


def test_a_domain_premise_that_shows_the_gold_option_warns(tmp_path, caplog):
    records = [{**r, "key": [r["a"], r["b"]][r["label"]]} for r in RECORDS]  # the gold, again
    write_task(tmp_path, write_jsonl(tmp_path, records), domain_premise='"It is {{ key }}:"')
    with caplog.at_level(logging.WARNING):
        load(tmp_path)
    (warning,) = _warnings(caplog, "gives the answer away")
    assert (
        "'It is {{ key }}:' shows the gold option's text, and no other option's, on 3 of 3"
        in warning
    )
    assert "first: document 0" in warning


def test_a_plain_domain_premise_gives_no_such_warning(tmp_path, caplog):
    write_task(tmp_path, write_jsonl(tmp_path, RECORDS))
    with caplog.at_level(logging.WARNING):
        load(tmp_path)
    assert not _warnings(caplog, "away")


def test_options_that_differ_only_in_unicode_normalization_warn(tmp_path, caplog):
    nfc, nfd = "caf\u00e9", "cafe\u0301"  # one word, two forms
    records = [{**GOOD, "a": nfc, "b": nfd}, *RECORDS[1:]]
    write_task(tmp_path, write_jsonl(tmp_path, records))
    with caplog.at_level(logging.WARNING):
        load(tmp_path)
    (warning,) = _warnings(caplog, "Unicode normalization")
    first = f"(first: document 0, {nfc!r} and {nfd!r}"
    assert f"1 document has options that differ only in Unicode normalization {first}" in warning


def test_a_group_that_holds_itself_is_one_line_naming_it(tmp_path, capsys):
    from lm_eval_dcpmi import cli

    write_task(tmp_path, write_jsonl(tmp_path, RECORDS))
    (tmp_path / "outer.yaml").write_text("group: outer\ntask: [inner, quiz_bad]\n")
    (tmp_path / "inner.yaml").write_text("group: inner\ntask: [outer]\n")
    argv = ["run", "--model", "dummy", "--include_path", str(tmp_path), "--tasks", "outer"]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "RecursionError" not in err
    assert err.splitlines()[-1] == (
        "dcpmi: group 'outer' holds itself (outer -> inner -> outer), so lm-eval would build it "
        f"forever; remove 'outer' from the task list of 'inner' ({tmp_path / 'inner.yaml'})."
    )


@pytest.mark.parametrize(
    "members",
    [
        "[quiz_bad, outer]",  # after a task: the stack runs out while its data is read
        "\n  - group: outer\n    task: [quiz_bad]\n  - quiz_bad",  # {group: outer, ...}
    ],
)
def test_a_group_that_lists_itself_is_blamed_on_the_group_not_the_data(tmp_path, capsys, members):
    from lm_eval_dcpmi import cli

    write_task(tmp_path, write_jsonl(tmp_path, RECORDS))
    (tmp_path / "outer.yaml").write_text(f"group: outer\ntask: {members}\n")
    argv = ["run", "--model", "dummy", "--include_path", str(tmp_path), "--tasks", "outer"]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "RecursionError" not in err and "quiz.jsonl" not in err
    assert err.splitlines()[-1] == (
        "dcpmi: group 'outer' holds itself (outer -> outer), so lm-eval would build it "
        f"forever; remove 'outer' from the task list of 'outer' ({tmp_path / 'outer.yaml'})."
    )


def test_a_function_that_does_not_import_is_one_line(tmp_path, capsys):
    from lm_eval_dcpmi import cli

    write_task(tmp_path, write_jsonl(tmp_path, RECORDS), **{"class": "!function no_such_module.X"})
    argv = ["run", "--model", "dummy", "--include_path", str(tmp_path), "--tasks", "quiz_bad"]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.splitlines()[-1].startswith(
        "dcpmi: lm-eval: Cannot import module 'no_such_module' for function 'X'"
    )
    assert err.splitlines()[-1].endswith("put the module beside the YAML (e.g. utils.py).")
