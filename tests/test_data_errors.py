"""Data files that cannot be read as the loaders expect: not UTF-8, a folder for a file or
a file for a folder, a byte-order mark, bad JSON. Each ends in one ``DataError`` naming
the file and line (and byte offset, column) and the fix; `dcpmi run` prints it as one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lm_eval_dcpmi import cli
from lm_eval_dcpmi.data import _loaders as data
from lm_eval_dcpmi.errors import DataError

AGNEWS_HEADER = "Class Index,Title,Description\n"
AGNEWS_ROW = '3,"Fears for pension","Unions say they are disappointed."\n'
STORY_HEADER = (
    "InputStoryid\tInputSentence1\tInputSentence2\tInputSentence3\tInputSentence4\t"
    "RandomFifthSentenceQuiz1\tRandomFifthSentenceQuiz2\tAnswerRightEnding\n"
)
STORY_ROW = "id1\tA went out.\tIt rained.\tA got wet.\tA went home.\tA was happy.\tA dried.\t2\n"
HELLASWAG_ROW = json.dumps({"ctx": "A man sits. he", "endings": ["a", "b", "c", "d"], "label": 1})
SST_ROW = "__label__4\tA good film .\n"
RACE_ARTICLE = json.dumps(
    {"article": "An article.", "questions": ["Why?"], "options": [["a", "b"]], "answers": ["B"]}
)

# loader, file (relative to the data folder), record, a good first record (line 1 or header)
FILE_LOADERS = [
    (data.csv_rows, "agnews/test.csv", "agnews", AGNEWS_HEADER),
    (data.tsv, "storycloze/test_spring2016.tsv", "storycloze", STORY_HEADER),
    (data.jsonl, "hellaswag/hellaswag_val.jsonl", "hellaswag", HELLASWAG_ROW + "\n"),
    (data.labelled_lines, "sst/sst_test.txt", "sst5", SST_ROW),
    (data.labelled_lines, "trec/test.txt", "trec", "NUM:dist How far is it ?\n"),
    (data.xml_items, "copa/copa-dev.xml", "copa", '<?xml version="1.0"?>\n<copa-corpus>\n'),
]
IDS = [file for _loader, file, _record, _first in FILE_LOADERS]


def write(root: Path, file: str, content: bytes) -> Path:
    path = root / file
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    return path


@pytest.mark.fast
@pytest.mark.parametrize(("loader", "file", "record", "first"), FILE_LOADERS, ids=IDS)
def test_not_utf8_names_file_line_and_byte(tmp_path, loader, file, record, first):
    head = first.encode()
    path = write(tmp_path, file, head + b"caf\xe9 au lait\n")  # Latin-1, after `first`
    with pytest.raises(DataError) as caught:
        loader(file, record, data_dir=tmp_path)
    line = first.count("\n") + 1
    assert str(caught.value) == (
        f"{file}:{line}: not UTF-8 text (byte 0xe9 at byte offset {len(head) + 3} of {path}); "
        "convert the file to UTF-8 (e.g. `iconv -f latin1 -t utf-8`) or fetch the original "
        "file again."
    )


@pytest.mark.fast
def test_xml_that_declares_another_encoding_is_read_in_it(tmp_path):
    item = (
        '<item id="1" asks-for="cause" most-plausible-alternative="1"><p>Il a bu un caf\xe9.</p>'
        "<a1>Il avait soif.</a1><a2>Il pleuvait.</a2></item>"
    )
    text = f'<?xml version="1.0" encoding="ISO-8859-1"?>\n<copa-corpus>{item}</copa-corpus>\n'
    write(tmp_path, "copa/copa-dev.xml", text.encode("latin-1"))
    rows = data.xml_items("copa/copa-dev.xml", "copa", data_dir=tmp_path)["test"]
    assert rows[0]["p"] == "Il a bu un café."


@pytest.mark.fast
@pytest.mark.parametrize(("loader", "file", "record", "first"), FILE_LOADERS, ids=IDS)
def test_folder_where_a_file_belongs(tmp_path, loader, file, record, first):
    (tmp_path / file).mkdir(parents=True)
    with pytest.raises(DataError) as caught:
        loader(file, record, data_dir=tmp_path)
    assert str(caught.value) == (
        f"{tmp_path / file} is a folder, but {file} must be a file; put the file itself there "
        "(docs/tasks.md lists each task's file)."
    )


@pytest.mark.fast
def test_file_where_the_race_folder_belongs(tmp_path):
    write(tmp_path, "race/test/high", RACE_ARTICLE.encode())
    with pytest.raises(DataError) as caught:
        data.race_folder("race/test/high", "race", data_dir=tmp_path)
    assert str(caught.value).startswith(
        f"{tmp_path}/race/test/high is a file, but race/test/high must be a folder (of RACE's "
        "*.txt article files"
    )


@pytest.mark.fast
def test_race_article_not_utf8(tmp_path):
    write(tmp_path, "race/test/high/1.txt", RACE_ARTICLE.encode())
    path = write(tmp_path, "race/test/high/2.txt", b'{"article": "caf\xe9"}')
    with pytest.raises(DataError) as caught:
        data.race_folder("race/test/high", "race", data_dir=tmp_path)
    assert str(caught.value).startswith(
        f"race/test/high/2.txt:1: not UTF-8 text (byte 0xe9 at byte offset 16 of {path});"
    )


@pytest.mark.fast
def test_race_bad_json_names_line_and_column(tmp_path):
    write(tmp_path, "race/test/high/1.txt", b'{"article": "An article.",\n "questions": [,]}')
    with pytest.raises(DataError) as caught:
        data.race_folder("race/test/high", "race", data_dir=tmp_path)
    assert str(caught.value) == (
        "race/test/high/1.txt:2: not valid JSON at column 16 (Expecting value)."
    )


@pytest.mark.fast
def test_jsonl_bad_json_names_line_and_column(tmp_path):
    write(tmp_path, "h.jsonl", (HELLASWAG_ROW + "\n" + '{"ctx": "x", "label" 1}\n').encode())
    with pytest.raises(DataError) as caught:
        data.jsonl("h.jsonl", "hellaswag", data_dir=tmp_path)
    assert str(caught.value) == "h.jsonl:2: not valid JSON at column 22 (Expecting ':' delimiter)."


BOM = b"\xef\xbb\xbf"


@pytest.mark.fast
@pytest.mark.parametrize(
    ("loader", "file", "record", "content", "field", "value"),
    [
        (
            data.csv_rows,
            "a.csv",
            "agnews",
            AGNEWS_HEADER + AGNEWS_ROW,
            "title",
            "Fears for pension",
        ),
        (data.tsv, "s.tsv", "storycloze", STORY_HEADER + STORY_ROW, "InputStoryid", "id1"),
        (data.jsonl, "h.jsonl", "hellaswag", HELLASWAG_ROW + "\n", "ctx", "A man sits. he"),
        (data.labelled_lines, "s.txt", "sst5", SST_ROW, "label", 4),
    ],
)
def test_byte_order_mark_is_not_part_of_the_first_field(
    tmp_path, loader, file, record, content, field, value
):
    write(tmp_path, file, BOM + content.encode())
    row = loader(file, record, data_dir=tmp_path)["test"][0]
    assert row[field] == value
    assert all("\ufeff" not in name for name in row)


def test_not_utf8_stops_dcpmi_run_with_one_line(tmp_path, monkeypatch, capsys):
    path = write(tmp_path, "copa/copa-dev.xml", b'<?xml version="1.0"?>\n<p>caf\xe9</p>\n')
    monkeypatch.setenv("DCPMI_DATA_DIR", str(tmp_path))
    assert cli.main(["run", "--tasks", "dcpmi_copa", "--limit", "2"]) == 2
    assert capsys.readouterr().err == (
        f"dcpmi: copa/copa-dev.xml:2: not UTF-8 text (byte 0xe9 at byte offset 28 of {path}); "
        "convert the file to UTF-8 (e.g. `iconv -f latin1 -t utf-8`) or fetch the original "
        "file again.\n"
    )
