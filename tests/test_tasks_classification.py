"""The seven classification tasks on the real files: spec strings byte for byte, bad input.

Expected strings are written out by hand from ../shared/spec/tasks.md and the raw
data files (first records of each file), not produced by the code under test.
"""

from __future__ import annotations

import json
import logging
from collections import Counter

import pytest
from helpers import bare, load_task, request_pairs, tasks_by_name

from lm_eval_dcpmi import _paper as paper
from lm_eval_dcpmi._harness._index import task_index
from lm_eval_dcpmi.data import _loaders as data
from lm_eval_dcpmi.data._folders import dataset_module
from lm_eval_dcpmi.rules._scoring import ACCURACIES
from lm_eval_dcpmi.task._tokens import TokenCounter, literal_special_tokens


def requests(premise: str, domain: str, options: list[str]) -> list[tuple[str, str]]:
    """One document's requests as the task orders them: conditional, then domain."""
    return [(premise, o) for o in options] + [(domain, o) for o in options]


# --------------------------------------------------------------------- item counts


# task -> (items, documents per gold index); gold counts from the raw files with grep/cut
# (boolq: 2033 true, 1237 false; ...)
ITEMS_AND_GOLDS = {
    "dcpmi_boolq": (3270, {0: 2033, 1: 1237}),
    "dcpmi_rte": (277, {0: 146, 1: 131}),
    "dcpmi_cb": (56, {0: 23, 1: 28, 2: 5}),
    "dcpmi_sst2": (1821, {0: 279 + 633, 1: 510 + 399}),
    "dcpmi_sst5": (2210, {0: 279, 1: 633, 2: 389, 3: 510, 4: 399}),
    "dcpmi_agn": (7600, {0: 1900, 1: 1900, 2: 1900, 3: 1900}),
    # DESC 138, ENTY 94, LOC 81, NUM 113, ABBR 9, HUM 65
    "dcpmi_trec": (500, {0: 138, 1: 94, 2: 81, 3: 113, 4: 9, 5: 65}),
}


@pytest.mark.fast
def test_every_classification_task_of_the_paper_is_counted():
    assert list(ITEMS_AND_GOLDS) == list(paper.tasks_of_kind("classification"))


@pytest.mark.parametrize("name", list(ITEMS_AND_GOLDS))
def test_item_count_and_labels_match_the_spec(task_manager, name):
    n_items, gold_counts = ITEMS_AND_GOLDS[name]
    docs = load_task(task_manager, name).eval_docs
    assert len(docs) == n_items
    assert dict(Counter(docs["gold"])) == gold_counts


# ------------------------------------------------------- first two documents, exactly


def test_boolq_first_documents(task_manager):
    task = load_task(task_manager, "dcpmi_boolq")
    options = [" yes", " no"]
    p1 = (
        " title: Ethanol fuel\n question: Does ethanol take more energy make that produces?\n"
        " answer:"
    )
    p2 = " title: Property tax\n question: Is house tax and property tax are same?\n answer:"
    assert request_pairs(task, 2) == [
        requests(p1, "\n answer:", options),
        requests(p2, "\n answer:", options),
    ]
    assert task.eval_docs[0]["gold"] == 1  # answer false
    assert task.eval_docs[1]["gold"] == 0  # answer true


def test_boolq_capitalises_and_replaces_lone_i(task_manager):
    task = load_task(task_manager, "dcpmi_boolq")
    doc = task.eval_docs[231]  # boolq/dev.jsonl line 232
    assert doc["question"] == "is i can only imagine based on a true story"
    assert task.doc_to_text(doc) == (
        " title: I Can Only Imagine (film)\n"
        " question: Is I can only imagine based on a true story?\n"
        " answer:"
    )
    doc = task.eval_docs[240]  # line 241
    assert task.doc_to_text(doc) == (
        " title: All I Want for Christmas Is You\n"
        " question: Did mariah carey wrote all I want for christmas is you?\n"
        " answer:"
    )


def test_rte_first_documents(task_manager):
    task = load_task(task_manager, "dcpmi_rte")
    options = [" true", " false"]
    domain = " true or false?\n answer:"
    p1 = (
        " Dana Reeve, the widow of the actor Christopher Reeve, has died of lung cancer at "
        "age 44, according to the Christopher Reeve Foundation.\n"
        " question: Christopher Reeve had an accident. true or false?\n answer:"
    )
    p2 = (
        " Yet, we now are discovering that antibiotics are losing their effectiveness against "
        "illness. Disease-causing bacteria are mutating faster than we can come up with new "
        "antibiotics to fight the new variations.\n"
        " question: Bacteria is winning the war against antibiotics. true or false?\n answer:"
    )
    assert request_pairs(task, 2) == [
        requests(p1, domain, options),
        requests(p2, domain, options),
    ]
    assert [task.eval_docs[i]["gold"] for i in (0, 1)] == [1, 0]


def test_cb_first_documents(task_manager):
    task = load_task(task_manager, "dcpmi_cb")
    options = [" true", " false", " neither"]
    domain = " the answer is:"
    p1 = (
        ' question: Given that "Valence the void-brain, Valence the virtuous valet. Why '
        "couldn't the figger choose his own portion of titanic anatomy to shaft? Did he "
        'think he was helping?" Is "Valence was helping" true, false, or neither?\n answer:'
    )
    p2 = (
        " question: Given that \"``Who knows? The point is, do we go with it or not?'' Do we "
        'assume there is a shipment?" Is "there is a shipment" true, false, or neither?\n'
        " answer:"
    )
    assert request_pairs(task, 2) == [
        requests(p1, domain, options),
        requests(p2, domain, options),
    ]
    assert [task.eval_docs[i]["gold"] for i in (0, 1)] == [1, 2]  # contradiction, neutral


def test_sst2_first_documents_skip_label_3(task_manager):
    task = load_task(task_manager, "dcpmi_sst2")
    options = [" negative\n", " positive\n"]
    domain = " The quote has a tone that is"
    # sst_test.txt line 1 is __label__3 (dropped); lines 2 and 3 are labels 4 and 5.
    p1 = (
        '"If you sometimes like to go to the movies to have fun , Wasabi is a good place '
        'to start ." has a tone that is'
    )
    p2 = (
        "\"Emerges as something rare , an issue movie that 's so honest and keenly observed "
        "that it does n't feel like one .\" has a tone that is"
    )
    assert request_pairs(task, 2) == [
        requests(p1, domain, options),
        requests(p2, domain, options),
    ]
    assert [task.eval_docs[i]["gold"] for i in (0, 1)] == [1, 1]


def test_sst5_first_documents(task_manager):
    task = load_task(task_manager, "dcpmi_sst5")
    options = [
        " very negative.<|endoftext|>",
        " somewhat negative.<|endoftext|>",
        " neutral.<|endoftext|>",
        " somewhat positive.<|endoftext|>",
        " very positive.<|endoftext|>",
    ]
    domain = " The quote has a tone that is"
    p1 = '"Effective but too-tepid biopic" has a tone that is'
    p2 = (
        '"If you sometimes like to go to the movies to have fun , Wasabi is a good place '
        'to start ." has a tone that is'
    )
    assert request_pairs(task, 2) == [
        requests(p1, domain, options),
        requests(p2, domain, options),
    ]
    assert [task.eval_docs[i]["gold"] for i in (0, 1)] == [2, 3]  # labels 3 and 4


def test_agn_first_documents(task_manager):
    task = load_task(task_manager, "dcpmi_agn")
    options = [" world", " sports", " business", " science"]
    domain = "\n topic:"
    # The file's text unchanged: three spaces in "Turner   Newall", literal backslashes.
    p1 = (
        " title: Fears for T N pension after talks\n"
        " summary: Unions representing workers at Turner   Newall say they are 'disappointed' "
        "after talks with stricken parent firm Federal Mogul.\n"
        " topic:"
    )
    p2 = (
        " title: The Race is On: Second Private Team Sets Launch Date for Human Spaceflight "
        "(SPACE.com)\n"
        " summary: SPACE.com - TORONTO, Canada -- A second\\team of rocketeers competing for "
        "the  #36;10 million Ansari X Prize, a contest for\\privately funded suborbital space "
        "flight, has officially announced the first\\launch date for its manned rocket.\n"
        " topic:"
    )
    assert request_pairs(task, 2) == [
        requests(p1, domain, options),
        requests(p2, domain, options),
    ]
    assert [task.eval_docs[i]["gold"] for i in (0, 1)] == [2, 3]


def test_trec_first_documents(task_manager):
    task = load_task(task_manager, "dcpmi_trec")
    options = [
        " a description.",
        " an entity.",
        " a location.",
        " a number.",
        " an abbreviation.",
        " a person.",
    ]
    domain = " The answer to this question will be"
    assert request_pairs(task, 2) == [
        # NUM:dist How far is it from Denver to Aspen ?
        requests(
            " How far is it from Denver to Aspen? The answer to this question will be",
            domain,
            options,
        ),
        # LOC:city What county is Modesto , California in ?
        requests(
            " What county is Modesto, California in? The answer to this question will be",
            domain,
            options,
        ),
    ]
    assert [task.eval_docs[i]["gold"] for i in (0, 1)] == [3, 2]


# ------------------------------------------------------------- TREC detokenisation


@pytest.mark.fast
@pytest.mark.parametrize(
    ("line", "question"),
    [
        # trec/test.txt line 62: step 1 turns the lone quote into a double quote.
        ("What was W.C. Fields ' real name ?", 'What was W.C. Fields" real name?'),
        # line 148: step 1 runs before step 2 ("s '" -> "s'"), so the same happens here.
        (
            "What were Christopher Columbus ' three ships ?",
            'What were Christopher Columbus" three ships?',
        ),
        # line 8: step 7.
        ("What is Australia 's national flower ?", "What is Australia's national flower?"),
        # line 53: `` and '' (step 1), " ?" (step 4), " 's" (step 7).
        (
            "Which comedian 's signature line is `` Can we talk '' ?",
            'Which comedian\'s signature line is "Can we talk"?',
        ),
        # line 176
        (
            "What U.S. state 's motto is `` Live free or Die '' ?",
            'What U.S. state\'s motto is "Live free or Die"?',
        ),
        # line 2
        ("What county is Modesto , California in ?", "What county is Modesto, California in?"),
        # line 500 (the file's last line, no final newline)
        ("What is e-coli ?", "What is e-coli?"),
        # Not in the TREC test file; the other steps, worked by hand:
        # step 3 (@-@), 4 (" ,", " ."), 5 (brackets), 6 (" N "), 7 (" 's"), 8 (" n't ").
        (
            "He did n't see ( the man ) , he 's 5 @-@ 6 N times .",
            "He didn't see (the man), he's 5-6 1 times.",
        ),
        ("[ a ] { b } ; x : y ! = = = z", "[a] {b}; x: y! === z"),
        (
            "I 'm sure they 've said we 'd go ; you 're late",
            "I'm sure they've said we'd go; you're late",
        ),
    ],
)
def test_detokenize(line, question):
    assert dataset_module("trec").detokenize(line).strip() == question


def test_trec_questions_in_the_task_are_detokenised(task_manager):
    task = load_task(task_manager, "dcpmi_trec")
    by_line = {int(d["source"].rsplit(":", 1)[1]): d for d in task.eval_docs}
    assert by_line[62]["question"] == 'What was W.C. Fields" real name?'
    assert by_line[8]["question"] == "What is Australia's national flower?"
    assert by_line[53]["coarse"] == "HUM"
    assert task.doc_to_text(by_line[8]) == (
        " What is Australia's national flower? The answer to this question will be"
    )


# --------------------------------------------------------------- SST-5 end of text


def byte_level_tokenizer_without_endoftext():
    """A small offline GPT-2-like tokenizer (bytes only, no merges) that lacks '<|endoftext|>'."""
    import tokenizers
    import transformers
    from tokenizers import decoders, models, pre_tokenizers

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    backend = tokenizers.Tokenizer(
        models.BPE(vocab={c: i for i, c in enumerate(alphabet)}, merges=[])
    )
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    return transformers.PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="</s>")


@pytest.fixture(scope="module")
def embedded_counter(task_manager):
    """The token counter the task builds from the model args (cached for the session)."""
    return load_task(task_manager, "dcpmi_sst5")._token_counter()


def test_endoftext_is_one_special_token_for_the_embedded_model(embedded_counter):
    tokenizer = embedded_counter.tokenizer
    assert literal_special_tokens([" neutral.<|endoftext|>"], tokenizer) == {}
    # ' very' ' negative' '.' '<|endoftext|>': the last is SmolLM2's special token 0
    # (its eos is '<|im_end|>', but '<|endoftext|>' is a special token too).
    assert embedded_counter.split('"x" has a tone that is', " very negative.<|endoftext|>")[1] == 4
    assert tokenizer.encode(" neutral.<|endoftext|>", add_special_tokens=False)[-1] == 0
    assert tokenizer.eos_token == "<|im_end|>"


@pytest.mark.fast
def test_a_tokenizer_without_endoftext_is_reported():
    tokenizer = byte_level_tokenizer_without_endoftext()
    texts = [" neutral.<|endoftext|>", " The quote has a tone that is", "</s>"]
    # 13 characters, one byte-level token each; '</s>' is this tokenizer's own eos token.
    assert literal_special_tokens(texts, tokenizer) == {"<|endoftext|>": 13}
    assert literal_special_tokens([" plain text <| not one |>"], tokenizer) == {}


def test_sst5_warns_once_when_the_tokenizer_lacks_endoftext(task_manager, monkeypatch, caplog):
    from lm_eval_dcpmi.task import _dcpmi_task as task_module

    counter = TokenCounter(byte_level_tokenizer_without_endoftext(), 2048, None)
    monkeypatch.setattr(task_module, "counter_for_metadata", lambda _metadata: counter)
    sst5 = load_task(task_manager, "dcpmi_sst5")
    with caplog.at_level(logging.WARNING, logger="lm_eval_dcpmi.task._dcpmi_task"):
        request_pairs(sst5, 2)  # the check runs when the requests are built
    warnings = [r.getMessage() for r in caplog.records if "<|endoftext|>" in r.getMessage()]
    assert len(warnings) == 1  # once for the task, not once per document or option
    assert warnings[0].startswith("dcpmi_sst5: the options or domain premise contain")
    assert "13 characters as ordinary text (13 tokens)" in warnings[0]
    assert "end-of-sequence token is '</s>'" in warnings[0]
    assert "sst/dcpmi_sst5.yaml" in warnings[0]


def test_sst5_does_not_warn_for_the_embedded_model(task_manager, embedded_counter, caplog):
    sst5 = load_task(task_manager, "dcpmi_sst5")
    with caplog.at_level(logging.WARNING, logger="lm_eval_dcpmi.task._dcpmi_task"):
        request_pairs(sst5, 2)
    assert not [r for r in caplog.records if "<|endoftext|>" in r.getMessage()]
    doc = sst5.eval_docs[0]
    premise = sst5.doc_to_text(doc)
    n_tokens = [embedded_counter.split(premise, option)[1] for option in sst5.doc_to_choice(doc)]
    assert n_tokens == [4, 4, 3, 4, 4]  # '<|endoftext|>' is one token
    # LM picks option 2 (the gold); per token, option 0 wins (-3.9 / 4 > -3.0 / 3).
    conditional = [-3.9, -9.0, -3.0, -9.0, -9.0]
    for instance in sst5.instances:  # as lm-eval stores answers (CC reads the carrier's)
        instance.resps = [(-1.0, False)]
    # document 0 carries the 3 x 5 content-free requests after its 5 domain requests
    results = [(ll, False) for ll in conditional + [-1.0] * 5 + [-1.0] * 15]
    scores = sst5.process_results(doc, results)
    assert doc["gold"] == 2
    assert (scores["acc"], scores["acc_avg"]) == (1.0, 0.0)


# --------------------------------------------------------------------- bad input


def write(tmp_path, file: str, text: str) -> None:
    path = tmp_path / file
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def jsonl_text(*rows: dict) -> str:
    return "".join(json.dumps(row) + "\n" for row in rows)


BOOLQ_OK = {"question": "is it", "title": "T", "answer": True, "passage": "P"}
RTE_OK = {"premise": "P.", "hypothesis": "H.", "label": "entailment", "idx": 0}
CB_OK = {"premise": "P.", "hypothesis": "H", "label": "neutral", "idx": 0}
AGN_HEADER = "Class Index,Title,Description\n"

BAD_INPUTS = [
    # (loader, file, record, file text, the error must match this)
    (
        data.jsonl,
        "boolq/dev.jsonl",
        "boolq",
        jsonl_text(BOOLQ_OK, {"question": "is it", "answer": False}),
        r"^boolq/dev\.jsonl:2: missing field 'title' \(fields present: answer, question\)",
    ),
    (
        data.jsonl,
        "boolq/dev.jsonl",
        "boolq",
        jsonl_text(BOOLQ_OK, {**BOOLQ_OK, "answer": "yes"}),
        r"^boolq/dev\.jsonl:2: answer 'yes' is not one of \[True, False\]",
    ),
    (
        data.jsonl,
        "boolq/dev.jsonl",
        "boolq",
        jsonl_text(BOOLQ_OK) + "{not json\n",
        r"^boolq/dev\.jsonl:2: not valid JSON at column 2 \(Expecting property name",
    ),
    (
        data.jsonl,
        "rte/val.jsonl",
        "rte",
        jsonl_text(RTE_OK, {**RTE_OK, "label": "neutral"}),
        r"^rte/val\.jsonl:2: label 'neutral' is not one of \['entailment', 'not_entailment'\]",
    ),
    (
        data.jsonl,
        "rte/val.jsonl",
        "rte",
        jsonl_text({**RTE_OK, "hypothesis": "  "}),
        r"^rte/val\.jsonl:1: field 'hypothesis' is empty",
    ),
    (
        data.jsonl,
        "cb/val.jsonl",
        "cb",
        jsonl_text(CB_OK, CB_OK, {**CB_OK, "label": "not_entailment"}),
        r"^cb/val\.jsonl:3: label 'not_entailment' is not one of "
        r"\['entailment', 'contradiction', 'neutral'\]",
    ),
    (
        data.jsonl,
        "cb/val.jsonl",
        "cb",
        jsonl_text({"hypothesis": "H", "label": "neutral"}),
        r"^cb/val\.jsonl:1: missing field 'premise'",
    ),
    (
        data.labelled_lines,
        "sst/sst_test.txt",
        "sst5",
        "__label__4\tGood .\n\n__label__2 Bad , with a space not a tab .\n",
        r"^sst/sst_test\.txt:3: expected '__label__N<TAB>sentence', got '__label__2 Bad",
    ),
    (
        data.labelled_lines,
        "sst/sst_test.txt",
        "sst5",
        "__label__4\tGood .\n__label__6\tToo good .\n",
        r"^sst/sst_test\.txt:2: label 6 is not one of \[1, 2, 3, 4, 5\]",
    ),
    (
        data.labelled_lines,
        "sst/sst_test.txt",
        "sst2",
        "__label__4\tGood .\n__label__1\t  \n",
        r"^sst/sst_test\.txt:2: the sentence is empty",
    ),
    (
        data.labelled_lines,
        "sst/sst_test.txt",
        "sst2",
        "__label__3\tNeutral .\n",
        r"^sst/sst_test\.txt: no records found",  # SST-2 drops label 3: nothing is left
    ),
    (
        data.labelled_lines,
        "trec/test.txt",
        "trec",
        "NUM:dist How far ?\nNUM How far ?\n",
        r"^trec/test\.txt:2: expected 'COARSE:fine question words', got 'NUM How far \?'",
    ),
    (
        data.labelled_lines,
        "trec/test.txt",
        "trec",
        "NUM:dist How far ?\nLOC:city\n",
        r"^trec/test\.txt:2: expected 'COARSE:fine question words', got 'LOC:city'",
    ),
    (
        data.labelled_lines,
        "trec/test.txt",
        "trec",
        "NUM:dist How far ?\nXYZ:foo What ?\n",
        r"^trec/test\.txt:2: coarse label 'XYZ' is not one of "
        r"\['DESC', 'ENTY', 'LOC', 'NUM', 'ABBR', 'HUM'\]",
    ),
    (
        data.csv_rows,
        "agnews/test.csv",
        "agnews",
        AGN_HEADER + '3,T,"D, quoted"\n2,Only a title\n',
        r"^agnews/test\.csv:3: expected 3 fields \(Class Index, Title, Description\); "
        "the row has a different number",
    ),
    (
        data.csv_rows,
        "agnews/test.csv",
        "agnews",
        AGN_HEADER + "3,T,D\n2,T,D,extra\n",
        r"^agnews/test\.csv:3: expected 3 fields",
    ),
    (
        data.csv_rows,
        "agnews/test.csv",
        "agnews",
        AGN_HEADER + "3,T,D\n5,T,D\n",
        r"^agnews/test\.csv:3: Class Index '5' is not one of \['1', '2', '3', '4'\]",
    ),
    (
        data.csv_rows,
        "agnews/test.csv",
        "agnews",
        AGN_HEADER + "3,T,\n",
        r"^agnews/test\.csv:2: field 'Description' is empty",
    ),
    (
        data.csv_rows,
        "agnews/test.csv",
        "agnews",
        "Label,Title,Text\n3,T,D\n",
        r"^agnews/test\.csv:2: missing field 'Description' \(fields present: Label, Text, Title\)",
    ),
]


@pytest.mark.fast
@pytest.mark.parametrize(
    ("loader", "file", "record", "text", "expected"),
    BAD_INPUTS,
    ids=[f"{case[2]}-{i}" for i, case in enumerate(BAD_INPUTS)],
)
def test_bad_input_names_file_line_and_problem(tmp_path, loader, file, record, text, expected):
    write(tmp_path, file, text)
    with pytest.raises(data.DataError, match=expected):
        loader(file, record=record, data_dir=tmp_path)


@pytest.mark.fast
@pytest.mark.parametrize(
    ("loader", "file", "record", "text", "gold"),
    [
        (data.jsonl, "boolq/dev.jsonl", "boolq", jsonl_text(BOOLQ_OK), 0),
        (data.jsonl, "rte/val.jsonl", "rte", jsonl_text(RTE_OK), 0),
        (data.jsonl, "cb/val.jsonl", "cb", jsonl_text(CB_OK), 2),
        (data.labelled_lines, "sst/sst_test.txt", "sst2", "__label__2\tBad .\n", 0),
        (data.labelled_lines, "sst/sst_test.txt", "sst5", "__label__2\tBad .\n", 1),
        (data.labelled_lines, "trec/test.txt", "trec", "HUM:ind Who ?", 5),
        (data.csv_rows, "agnews/test.csv", "agnews", AGN_HEADER + '2,T,"D, d"\n', 1),
    ],
)
def test_small_good_files_load(tmp_path, loader, file, record, text, gold):
    write(tmp_path, file, text)
    assert loader(file, record=record, data_dir=tmp_path)["test"]["gold"] == [gold]


@pytest.mark.fast
def test_a_bad_file_fails_the_task_load_through_the_task_manager(tmp_path):
    """The YAML's dataset_kwargs plus --metadata data_dir reach the loader."""
    from lm_eval.tasks import TaskManager

    from lm_eval_dcpmi import task_configs_dir

    write(tmp_path, "trec/test.txt", "NUM:dist How far ?\nWHAT:x Why ?\n")
    manager = TaskManager(
        include_path=str(task_configs_dir()),
        include_defaults=False,  # index only the plugin's tasks (lm-eval's own take ~10 s)
        metadata={"data_dir": str(tmp_path)},
    )
    with pytest.raises(data.DataError, match=r"trec/test\.txt:2: coarse label 'WHAT'"):
        manager.load(["dcpmi_trec"])


# -------------------------------------------------------------------------- group


def test_group_dcpmi_is_the_papers_tasks_with_an_unweighted_mean_of_every_accuracy(
    task_manager,
):
    loaded = task_manager.load([paper.PAPER_GROUP])
    group = loaded["groups"][paper.PAPER_GROUP]
    assert [bare(name) for name in group.child_names] == list(paper.paper_order())
    assert sorted(tasks_by_name(loaded)) == sorted(paper.paper_order())
    assert [(a.metric, a.aggregation, a.weight_by_size) for a in group.aggregate_metric_list] == [
        (metric, "mean", False) for metric in ACCURACIES
    ]


@pytest.mark.parametrize("kind", ["mcqa", "classification"])
def test_lm_evals_tags_agree_with_the_papers_kinds(task_manager, kind):
    """_paper.py reads each task YAML's own `tag:`; lm-eval also follows `include:`. A tag
    moved into an included base would split the two."""
    assert task_index(task_manager)[f"dcpmi_{kind}"].tags == set(paper.tasks_of_kind(kind))
