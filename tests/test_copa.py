"""dcpmi_copa on the real copa-dev.xml: spec strings byte for byte, and bad input."""

import pytest
from helpers import load_task, request_pairs

from lm_eval_dcpmi.data import _loaders as data


@pytest.fixture(scope="module")
def copa(task_manager):
    return load_task(task_manager, "dcpmi_copa")


def test_all_500_dev_items_in_file_order(copa):
    docs = copa.eval_docs
    assert len(docs) == 500
    assert [d["id"] for d in docs.select(range(3))] == ["1", "2", "3"]
    assert [d["gold"] for d in docs.select(range(3))] == [0, 0, 1]


def test_first_items_match_the_spec_strings(copa):
    premise_1 = " My body cast a shadow over the grass because"
    premise_2 = " The woman tolerated her friend's difficult behavior because"
    assert request_pairs(copa, 2) == [
        [
            (premise_1, " the sun was rising."),
            (premise_1, " the grass was cut."),
            (" because", " the sun was rising."),
            (" because", " the grass was cut."),
        ],
        [
            (premise_2, " the woman knew her friend was going through a hard time."),
            (premise_2, " the woman felt that her friend took advantage of her kindness."),
            (" because", " the woman knew her friend was going through a hard time."),
            (" because", " the woman felt that her friend took advantage of her kindness."),
        ],
    ]


def test_effect_items_bridge_with_so(copa):
    doc = copa.eval_docs[8]  # item id 9, the first asks-for="effect"
    assert doc["id"] == "9"
    assert copa.doc_to_text(doc) == " The physician misdiagnosed the patient so"
    assert copa.doc_to_choice(doc) == [
        " the patient filed a malpractice lawsuit against the physician.",
        " the patient disclosed confidential information to the physician.",
    ]
    assert copa.domain_premise(doc) == " so"


COPA_HEADER = '<?xml version="1.0" encoding="UTF-8"?>\n<copa-corpus version="1.0">\n'
GOOD_ITEM = (
    '<item id="1" asks-for="cause" most-plausible-alternative="1">'
    "<p>P.</p><a1>A one.</a1><a2>A two.</a2></item>\n"
)


def write_copa(tmp_path, items: str) -> None:
    (tmp_path / "copa").mkdir()
    (tmp_path / "copa" / "copa-dev.xml").write_text(COPA_HEADER + items + "</copa-corpus>\n")


def load(tmp_path):
    return data.xml_items("copa/copa-dev.xml", record="copa", data_dir=tmp_path)


@pytest.mark.fast
def test_a_good_file_loads(tmp_path):
    write_copa(tmp_path, GOOD_ITEM)
    assert load(tmp_path)["test"][0]["gold"] == 0


@pytest.mark.fast
@pytest.mark.parametrize(
    ("item", "expected"),
    [
        (
            '<item id="7" asks-for="cause" most-plausible-alternative="1"><p>P.</p>'
            "<a1>A one.</a1></item>",
            r"copa/copa-dev.xml item 1 \(id=7\): missing field 'a2'",
        ),
        (
            '<item id="8" asks-for="because" most-plausible-alternative="1"><p>P.</p>'
            "<a1>A.</a1><a2>B.</a2></item>",
            r"item 1 \(id=8\): asks-for 'because' is not one of \['cause', 'effect'\]",
        ),
        (
            '<item id="9" asks-for="effect" most-plausible-alternative="3"><p>P.</p>'
            "<a1>A.</a1><a2>B.</a2></item>",
            r"item 1 \(id=9\): most-plausible-alternative '3' is not one of \['1', '2'\]",
        ),
        (
            '<item id="10" asks-for="effect" most-plausible-alternative="1"><p>P.</p>'
            "<a1>A.</a1><a2>  </a2></item>",
            r"item 1 \(id=10\): field 'a2' is empty",
        ),
    ],
)
def test_bad_items_name_file_and_item(tmp_path, item, expected):
    write_copa(tmp_path, GOOD_ITEM + item + "\n")  # the bad one is item 2
    with pytest.raises(data.DataError, match=expected.replace("item 1", "item 2")):
        load(tmp_path)


@pytest.mark.fast
def test_unreadable_xml(tmp_path):
    write_copa(tmp_path, GOOD_ITEM + "<item id='2'><p>unclosed</item>")
    with pytest.raises(
        data.DataError, match=r"copa/copa-dev.xml:\d+: not well-formed XML at column \d+ \(mis"
    ):
        load(tmp_path)


@pytest.mark.fast
def test_missing_data_folder(tmp_path):
    with pytest.raises(data.DataError, match=r"data folder .*nowhere does not exist"):
        data.xml_items("copa/copa-dev.xml", record="copa", data_dir=tmp_path / "nowhere")


@pytest.mark.fast
def test_missing_file_in_data_folder(tmp_path):
    with pytest.raises(data.DataError, match=r"copa-dev.xml not found: the data folder .* has no"):
        load(tmp_path)


@pytest.mark.fast
def test_env_var_is_used_and_named(tmp_path, monkeypatch):
    monkeypatch.setenv("DCPMI_DATA_DIR", str(tmp_path / "absent"))
    with pytest.raises(data.DataError, match=r"does not exist \(from DCPMI_DATA_DIR\)"):
        data.locate("copa/copa-dev.xml")


@pytest.mark.fast
def test_without_data_folder_it_downloads_and_says_where_it_looked(monkeypatch):
    # COPA ships in the package (tests/test_embedded_copa.py); a file it does not carry is
    # downloaded. No network here (and offline mode on): the download must fail with a
    # message naming the upstream address and how to point the plugin at local files.
    monkeypatch.delenv("DCPMI_DATA_DIR")
    with pytest.raises(data.DataError) as error:
        data.locate("storycloze/test_spring2016.tsv")
    message = str(error.value)
    assert "DCPMI_DATA_DIR is not set" in message
    assert "snigdhac/StoryComprehension_EMNLP/master/Dataset/RoCStories/" in message
