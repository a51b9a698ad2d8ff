"""The paper's other studies as tasks: SST-2 under 15 templates, four-shot SST-2 over five
example sets, COPA Flipped.

Expected strings are written by hand from ../shared/spec/paper_experiments.md,
../shared/spec/sst2_variants.md and the first records of the real files, not produced by
the code under test. The first two SST-2 documents are lines 2 and 3 of sst_test.txt
(line 1 is neutral, dropped).
"""

from __future__ import annotations

import ast
import importlib.util
import json
import math
import re
from collections import Counter
from pathlib import Path

import pytest
import transformers
from helpers import (
    GGUF_FILE,
    ROOT,
    SHARED_DATA,
    embedded_model_dir,
    lm_eval_once,
    load_task,
    request_pairs,
    tasks_by_name,
)
from recompute import expected_metrics

from lm_eval_dcpmi._harness._index import task_index
from lm_eval_dcpmi.data import _loaders as data
from lm_eval_dcpmi.errors import DataError
from lm_eval_dcpmi.rules._layout import conditional_and_domain
from lm_eval_dcpmi.rules._scoring import ACCURACIES

TEMPLATES_DIR = ROOT / "task_configs" / "sst" / "templates"
TEMPLATE_TASKS = [f"dcpmi_sst2_v{i}" for i in range(15)]
FOURSHOT_TASKS = [f"dcpmi_sst2_4shot_set{i}" for i in range(5)]

SST_DOC_1 = (
    "If you sometimes like to go to the movies to have fun , Wasabi is a good place to start ."
)
SST_DOC_2 = (
    "Emerges as something rare , an issue movie that 's so honest and keenly observed that "
    "it does n't feel like one ."
)


def requests(premise: str, domain: str, options: list[str]) -> list[tuple[str, str]]:
    """One document's requests as the task orders them: conditional, then domain."""
    return [(premise, o) for o in options] + [(domain, o) for o in options]


def sst_lines(name: str) -> list[tuple[int, str]]:
    """(label, sentence) of every line of an SST file, read here independently of the loader."""
    rows = []
    for line in (SHARED_DATA / "sst" / name).read_text(encoding="utf-8").splitlines():
        label, sentence = line.split("\t", 1)
        rows.append((int(label.removeprefix("__label__")), sentence))
    return rows


def generator():
    spec = importlib.util.spec_from_file_location(
        "sst2_templates", TEMPLATES_DIR / "_generate_configs.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ------------------------------------------------------------------ 15 templates


@pytest.mark.fast
def test_template_yamls_are_the_generators_output():
    expected = generator().render_all()
    on_disk = {p.name: p.read_text(encoding="utf-8") for p in TEMPLATES_DIR.glob("*.yaml")}
    assert on_disk == expected, "run task_configs/sst/templates/_generate_configs.py"
    assert len(expected) == 16  # 15 tasks and their group


@pytest.mark.fast
def test_template_strings_are_the_specs_python_literals():
    spec = SHARED_DATA.parent / "spec" / "sst2_variants.md"
    if not spec.exists():
        pytest.skip(f"{spec} is not here (the spec travels with the project, not the package)")
    variants = {}
    for line in spec.read_text(encoding="utf-8").splitlines():
        if re.match(r"\| \d+ \|", line):
            literals = [ast.literal_eval(x) for x in re.findall(r"`([^`]*)`", line)]
            variants[int(line.split("|")[1])] = (literals[0], literals[1], tuple(literals[2:]))
    assert len(variants) == 15
    assert dict(enumerate(generator().VARIANTS)) == variants


def test_template_group_has_the_15_tasks_on_sst2_data(task_manager):
    loaded = tasks_by_name(task_manager.load(["dcpmi_sst2_templates"]))
    assert sorted(loaded) == sorted(TEMPLATE_TASKS)
    for name, task in loaded.items():
        docs = task.eval_docs
        assert len(docs) == 1821, name
        # SST-2 test: 279 + 633 negative (labels 1-2), 510 + 399 positive (labels 4-5)
        assert dict(Counter(docs["gold"])) == {0: 912, 1: 909}, name
        assert docs[0]["sentence"] == SST_DOC_1
        assert task.config.target_delimiter == ""
        # the templates are a study, not part of the paper's 16 tasks: no dcpmi_* tag
        assert task_index(task_manager)[name].tags == set()


def test_sst2_v0_first_documents(task_manager):
    task = load_task(task_manager, "dcpmi_sst2_v0")
    domain, options = " Positive or Negative?\n Answer:", [" Negative", " Positive"]
    assert request_pairs(task, 2) == [
        requests(f" Review: {SST_DOC_1}\n Answer:", domain, options),
        requests(f" Review: {SST_DOC_2}\n Answer:", domain, options),
    ]
    assert [task.doc_to_target(d) for d in task.eval_docs.select([0, 1])] == [1, 1]


def test_sst2_v8_first_documents(task_manager):
    task = load_task(task_manager, "dcpmi_sst2_v8")
    question = (
        " Question: Did the author of the following tweet think that the movie was good or bad?"
    )
    domain = " Was the movie was good or bad?\n Tweet: <redacted>\n Answer:"
    options = [" bad", " good"]
    assert request_pairs(task, 2) == [
        requests(f"{question}\n Tweet: {SST_DOC_1}\n Answer:", domain, options),
        requests(f"{question}\n Tweet: {SST_DOC_2}\n Answer:", domain, options),
    ]


def test_sst2_v14_first_documents(task_manager):
    task = load_task(task_manager, "dcpmi_sst2_v14")
    domain, options = " How many stars would you give this movie:", [" 0", " 5"]
    assert request_pairs(task, 2) == [
        requests(f" Review: {SST_DOC_1} Stars:", domain, options),
        requests(f" Review: {SST_DOC_2} Stars:", domain, options),
    ]


@pytest.mark.parametrize(
    ("name", "domain"),
    [
        # two leading spaces (v4, v9) and none (v7), as in the authors' strings
        (
            "dcpmi_sst2_v4",
            "  Entertainment Weekly agreed, and the overall critical reception of the film was",
        ),
        ("dcpmi_sst2_v7", "the movie was good or bad?\n Answer:"),
        ("dcpmi_sst2_v9", "  My overall feeling was that the movie was"),
    ],
)
def test_domain_premise_whitespace_is_kept(task_manager, name, domain):
    task = load_task(task_manager, name)
    (doc,) = request_pairs(task, 1)
    assert {context for context, _ in doc[2:]} == {domain}


def test_sst2_v3_quotes_the_sentence(task_manager):
    task = load_task(task_manager, "dcpmi_sst2_v3")
    (doc,) = request_pairs(task, 1)
    assert doc[0] == (
        " Here is what our critics think for this month's films.\n One of our critics wrote "
        f'"{SST_DOC_1}". Her sentiment towards the film was',
        " negative.",
    )


# ------------------------------------------------------------------ four-shot SST-2

EXAMPLE = re.compile(r" (.+?): (positive|negative)\n")
ZERO_SHOT_DOMAIN = " The quote has a tone that is"


def split_examples(context: str, sentence: str) -> list[tuple[str, str]]:
    """The (sentence, label word) examples in front of ``'"<sentence>" has a tone that is'``."""
    premise = f'"{sentence}" has a tone that is'
    assert context.endswith(premise), context[-200:]
    prefix = context[: -len(premise)]
    examples = EXAMPLE.findall(prefix)
    # the examples are all there is: each ' <sentence>: <label>\n', joined with nothing
    assert "".join(f" {s}: {w}\n" for s, w in examples) == prefix
    return examples


def test_four_shot_context_is_four_training_examples_then_the_zero_shot_premise(task_manager):
    task = load_task(task_manager, "dcpmi_sst2_4shot_set0")
    assert len(task.eval_docs) == 1821
    train = {sentence: label for label, sentence in sst_lines("sst_train.txt") if label != 3}
    test_sentences = {sentence for _, sentence in sst_lines("sst_test.txt")}
    sets = []
    for doc, sentence in zip(request_pairs(task, 2), (SST_DOC_1, SST_DOC_2), strict=True):
        assert [option for _, option in doc] == [" negative\n", " positive\n"] * 2
        assert doc[0][0] == doc[1][0]
        examples = split_examples(doc[0][0], sentence)
        assert len(examples) == 4
        for example, word in examples:
            assert example in train, example
            assert word == ("positive" if train[example] > 3 else "negative")
            assert example not in test_sentences
        # the domain request never gets the examples
        assert [context for context, _ in doc[2:]] == [ZERO_SHOT_DOMAIN] * 2
        sets.append(examples)
    assert sets[0] == sets[1]  # one set for every test document (the paper's setting)


def test_set0_draws_the_committed_examples(task_manager):
    # Pins the draw of seed 0 (Python's random.Random.sample): the committed results in
    # results/studies were scored with exactly these four examples.
    task = load_task(task_manager, "dcpmi_sst2_4shot_set0")
    (doc,) = request_pairs(task, 1)
    assert split_examples(doc[0][0], SST_DOC_1) == [
        ("Nothing short of a masterpiece -- and a challenging one .", "positive"),
        ("Of all the Halloween 's , this is the most visually unappealing .", "negative"),
        (
            "Here , common sense flies out the window , along with the hail of bullets , none "
            "of which ever seem to hit Sascha .",
            "negative",
        ),
        (
            "Both heartbreaking and heartwarming ... just a simple fable done in an artless "
            "sytle , but it 's tremendously moving .",
            "positive",
        ),
    ]


def test_five_sets_differ_and_record_their_seed(task_manager):
    loaded = tasks_by_name(task_manager.load(["dcpmi_sst2_4shot"]))
    assert sorted(loaded) == FOURSHOT_TASKS
    drawn = {}
    for seed, name in enumerate(FOURSHOT_TASKS):
        task = loaded[name]
        # the seed is part of the task config that results_*.json records
        assert task.config.to_dict()["dataset_kwargs"]["fewshot_seed"] == seed
        assert task.config.num_fewshot == 4
        drawn[name] = tuple(task.dataset["train"]["sentence"])
    assert all(len(s) == 4 for s in drawn.values())
    assert len(set(drawn.values())) == 5
    all_examples = [s for examples in drawn.values() for s in examples]
    assert len(set(all_examples)) == 20  # and no sentence is shared between two sets here


def test_same_seed_draws_the_same_examples_twice(data_dir):
    kwargs = {
        "file": "sst/sst_test.txt",
        "record": "sst2",
        "data_dir": str(data_dir),
        "fewshot_file": "sst/sst_train.txt",
        "fewshot_n": 4,
    }
    first = data.labelled_lines_with_examples(**kwargs, fewshot_seed=3)["train"]
    second = data.labelled_lines_with_examples(**kwargs, fewshot_seed=3)["train"]
    other = data.labelled_lines_with_examples(**kwargs, fewshot_seed=4)["train"]
    assert first.to_list() == second.to_list()
    assert first["sentence"] != other["sentence"]
    # each example keeps the line it came from
    assert all(re.fullmatch(r"sst/sst_train\.txt:\d+", s) for s in first["source"])


@pytest.mark.fast
def test_draw_examples_is_a_seeded_sample():
    assert data.draw_examples(10, 3, seed=7) == data.draw_examples(10, 3, seed=7)
    assert sorted(data.draw_examples(4, 4, seed=1)) == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="asks for 5 examples but the pool holds 4"):
        data.draw_examples(4, 5, seed=0)


# ---- bad input for the few-shot loader (tiny files in a temporary data folder)


def write_sst(folder: Path, name: str, lines: list[str]) -> None:
    (folder / "sst").mkdir(exist_ok=True)
    (folder / "sst" / name).write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")


def load_examples(folder: Path, **overrides):
    kwargs = {
        "file": "sst/sst_test.txt",
        "record": "sst2",
        "data_dir": str(folder),
        "fewshot_file": "sst/sst_train.txt",
        "fewshot_n": 2,
        "fewshot_seed": 0,
    }
    return data.labelled_lines_with_examples(**{**kwargs, **overrides})


@pytest.fixture
def tiny(tmp_path):
    write_sst(tmp_path, "sst_test.txt", ["__label__1\tbad film .", "__label__5\tgreat film ."])
    write_sst(
        tmp_path,
        "sst_train.txt",
        [
            "__label__2\tdull .",
            "__label__3\tfine .",
            "__label__4\tfun .",
            "__label__5\tgreat film .",
        ],
    )
    return tmp_path


@pytest.mark.fast
def test_pool_leaves_out_neutral_and_test_sentences(tiny):
    dataset = load_examples(tiny)
    assert sorted(dataset["train"]["sentence"]) == ["dull .", "fun ."]
    assert dataset["test"]["sentence"] == ["bad film .", "great film ."]


@pytest.mark.fast
def test_more_examples_than_the_pool_holds_says_so(tiny):
    with pytest.raises(DataError, match=r"asks for 3 examples, but the pool holds only 2 usable"):
        load_examples(tiny, fewshot_n=3)


@pytest.mark.fast
def test_missing_pool_file_names_it(tiny):
    (tiny / "sst" / "sst_train.txt").unlink()
    with pytest.raises(DataError, match=r"sst_train\.txt not found"):
        load_examples(tiny)


@pytest.mark.fast
def test_malformed_pool_line_names_file_and_line(tiny):
    write_sst(tiny, "sst_train.txt", ["__label__2\tdull .", "label 4: fun ."])
    with pytest.raises(DataError, match=r"^sst/sst_train\.txt:2: expected '__label__N<TAB>"):
        load_examples(tiny)


@pytest.mark.fast
def test_empty_pool_file_says_so(tiny):
    write_sst(tiny, "sst_train.txt", [])
    with pytest.raises(DataError, match=r"sst/sst_train\.txt: no records found"):
        load_examples(tiny)


@pytest.mark.fast
@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"fewshot_file": None}, "examples need dataset_kwargs.fewshot_file"),
        ({"fewshot_n": 0}, r"fewshot_n must be an integer >= 1, got 0"),
        ({"fewshot_n": True}, r"fewshot_n must be an integer >= 1, got True"),
        ({"fewshot_seed": None}, r"fewshot_seed must be an integer >= 0, got None"),
        ({"fewshot_text_field": "text"}, r"no field 'text' \(fields: sentence, label"),
    ],
)
def test_bad_fewshot_settings_name_the_setting(tiny, overrides, message):
    with pytest.raises(DataError, match=message):
        load_examples(tiny, **overrides)


# ------------------------------------------------------------------ COPA Flipped

COPA_DOC_1 = " my body cast a shadow over the grass."
COPA_DOC_2 = " the woman tolerated her friend's difficult behavior."


def test_copa_flipped_first_documents(task_manager):
    task = load_task(task_manager, "dcpmi_copa_flipped")
    assert len(task.eval_docs) == 500
    assert dict(Counter(task.eval_docs["gold"])) == {0: 250, 1: 250}
    assert task.multiple_input == 2
    # both items ask for the cause: the alternative leads to the premise, bridge ' so'
    assert request_pairs(task, 2) == [
        [
            (" The sun was rising so", COPA_DOC_1),
            (" The grass was cut so", COPA_DOC_1),
            (" so", COPA_DOC_1),
            (" so", COPA_DOC_1),
        ],
        [
            (" The woman knew her friend was going through a hard time so", COPA_DOC_2),
            (" The woman felt that her friend took advantage of her kindness so", COPA_DOC_2),
            (" so", COPA_DOC_2),
            (" so", COPA_DOC_2),
        ],
    ]
    # the gold option is the index doc_to_text gives (item 1: most-plausible-alternative 1)
    assert task.doc_to_text(task.eval_docs[0]) == 0


def test_copa_flipped_effect_item_uses_because(task_manager):
    task = load_task(task_manager, "dcpmi_copa_flipped")
    doc = task.eval_docs[8]  # item 9, the first that asks for the effect
    assert doc["asks_for"] == "effect"
    assert task.doc_to_choice(doc) == [
        " The patient filed a malpractice lawsuit against the physician because",
        " The patient disclosed confidential information to the physician because",
    ]
    assert task.doc_to_target(doc) == " the physician misdiagnosed the patient."
    assert task.domain_premise(doc) == " because"


# ------------------------------------------------------------------ the real lm_eval CLI

E2E_LIMIT = 2


@pytest.fixture(scope="module")
def studies_run(tmp_path_factory, data_dir):
    tasks = "dcpmi_sst2_templates,dcpmi_sst2_4shot,dcpmi_copa_flipped"
    output_dir, _stdout = lm_eval_once(tmp_path_factory, "studies_run", tasks, E2E_LIMIT)
    (results_file,) = output_dir.rglob("results_*.json")
    return output_dir, json.loads(results_file.read_text())


def logged_samples(output_dir: Path, task: str) -> list[dict]:
    (path,) = output_dir.rglob(f"samples_{task}_*.jsonl")
    return [json.loads(line) for line in path.read_text().splitlines()]


def continuation_tokens(tokenizer, context: str, continuation: str) -> int:
    # lm-eval's split: trailing context whitespace joins the continuation, then
    # continuation tokens = tokens(context + continuation) - tokens(context).
    stripped = context.rstrip()
    continuation = context[len(stripped) :] + continuation
    return len(tokenizer.encode(stripped + continuation)) - len(tokenizer.encode(stripped))


@pytest.mark.slow
def test_cli_runs_each_study_and_its_metrics_recompute_from_the_logged_loglikelihoods(
    studies_run,
):
    output_dir, results = studies_run
    tokenizer = transformers.AutoTokenizer.from_pretrained(
        embedded_model_dir(), gguf_file=GGUF_FILE
    )
    tasks = [*TEMPLATE_TASKS, *FOURSHOT_TASKS, "dcpmi_copa_flipped"]
    assert set(tasks) <= set(results["results"])
    for task in tasks:
        samples = logged_samples(output_dir, task)
        assert len(samples) == E2E_LIMIT
        for sample in samples:
            pairs = [(a["arg_0"], a["arg_1"]) for a in sample["arguments"].values()]
            conditional_pairs, domain_pairs = conditional_and_domain(pairs)
            conditional, domain = conditional_and_domain([float(r[0][0]) for r in sample["resps"]])
            flipped = task == "dcpmi_copa_flipped"
            # the options lm-eval measures acc_norm by: the contexts for several inputs
            choices = [ctx if flipped else cont for ctx, cont in conditional_pairs]
            expected = expected_metrics(
                conditional,
                domain,
                sample["doc"]["gold"],
                [continuation_tokens(tokenizer, *p) for p in conditional_pairs],
                [len(c) for c in choices],
            )
            assert set(ACCURACIES) < set(expected)
            assert {m: sample[m] for m in expected} == expected, (task, sample["doc_id"])
            if task in FOURSHOT_TASKS:
                assert len(split_examples(pairs[0][0], sample["doc"]["sentence"])) == 4
                assert [ctx for ctx, _ in domain_pairs] == [ZERO_SHOT_DOMAIN] * len(domain_pairs)
            if flipped:  # one continuation: LM and Avg see the same option scores
                assert len({cont for _, cont in pairs}) == 1
                assert sample["acc"] == sample["acc_avg"]
        for metric in ACCURACIES:
            mean = sum(s[metric] for s in samples) / len(samples)
            assert math.isclose(results["results"][task][f"{metric},none"], mean)
    # the seeds are in the results file, so a rerun draws the same examples
    for seed, task in enumerate(FOURSHOT_TASKS):
        config = results["configs"][task]
        assert config["dataset_kwargs"]["fewshot_seed"] == seed
        assert config["num_fewshot"] == 4
    # each group's score is the plain mean over its tasks
    for group, members in (
        ("dcpmi_sst2_templates", TEMPLATE_TASKS),
        ("dcpmi_sst2_4shot", FOURSHOT_TASKS),
    ):
        for metric in ACCURACIES:
            mean = sum(results["results"][t][f"{metric},none"] for t in members) / len(members)
            assert math.isclose(results["results"][group][f"{metric},none"], mean), (group, metric)
