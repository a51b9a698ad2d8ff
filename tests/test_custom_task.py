"""DC-PMI added to a user's own lm-eval multiple-choice task in a few YAML lines, run
through lm-eval's own evaluator with the user's folder as include path (a made-up
dataset written here). The same through the `lm_eval` CLI: tests/test_cli.py."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest
from helpers import QUIZ_TEST, embedded_model_args, write_quiz_task
from recompute import expected_metrics

from lm_eval_dcpmi.errors import DCPMIConfigError
from lm_eval_dcpmi.rules._layout import conditional_and_domain
from lm_eval_dcpmi.rules._scoring import ACCURACIES, COUNTS
from lm_eval_dcpmi.task._tokens import counter_for_metadata

# The user's existing task: nothing DC-PMI about it.
BASE = {
    "doc_to_text": "Question: {{question}}\nAnswer:",
    "doc_to_choice": "choices",
    "doc_to_target": "label",
}

# Derived DC-PMI variants: `include:` the user's YAML, add the class and a domain premise.
VARIANTS = {
    "quiz_dcpmi_field": """\
include: quiz.yaml
task: quiz_dcpmi_field
class: !function lm_eval_dcpmi.task.DCPMITask
domain_premise: "\\nAnswer:"
""",
    "quiz_dcpmi_jinja": """\
include: quiz.yaml
task: quiz_dcpmi_jinja
class: !function lm_eval_dcpmi.task.DCPMITask
doc_to_choice: "{{ choices | map('upper') | list }}"
target_delimiter: " -> "
domain_premise: "{{ question.split()[0] }} Answer:"
""",
    "quiz_dcpmi_list": """\
include: quiz.yaml
task: quiz_dcpmi_list
class: !function lm_eval_dcpmi.task.DCPMITask
doc_to_text: "Question: {{question}} Is it the first option?\\nAnswer:"
doc_to_choice: [" yes", " no"]
doc_to_target: "{{ 0 if label == 0 else 1 }}"
target_delimiter: ""
domain_premise: " Is it the first option?\\nAnswer:"
""",
}


def write_tasks(folder: Path, variants: dict[str, str]) -> None:
    write_quiz_task(folder, "quiz", QUIZ_TEST, **BASE)
    for name, text in variants.items():
        (folder / f"{name}.yaml").write_text(text)


@pytest.fixture(scope="module")
def run(tmp_path_factory, hf_lm) -> dict:
    """The user's variants through lm-eval's Python API on the session's embedded model
    (the same harness code as the CLI, which test_end_to_end and test_cli run)."""
    import lm_eval
    from lm_eval.tasks import TaskManager

    folder = tmp_path_factory.mktemp("user_tasks")
    write_tasks(folder, VARIANTS)
    manager = TaskManager(include_path=str(folder), metadata=embedded_model_args())
    return lm_eval.simple_evaluate(
        model=hf_lm, tasks=list(VARIANTS), task_manager=manager, log_samples=True
    )


def requests_of(sample: dict) -> list[tuple[str, str]]:
    return [tuple(arguments[:2]) for arguments in sample["arguments"]]


EXPECTED_FIRST_REQUESTS = {
    # doc_to_choice as a field, lm-eval's default delimiter " " in both requests
    "quiz_dcpmi_field": [
        ("Question: What colour is fresh snow?\nAnswer:", " white"),
        ("Question: What colour is fresh snow?\nAnswer:", " black"),
        ("Question: What colour is fresh snow?\nAnswer:", " green"),
        ("\nAnswer:", " white"),
        ("\nAnswer:", " black"),
        ("\nAnswer:", " green"),
    ],
    # a Jinja doc_to_choice and the user's own delimiter, repeated after the domain premise
    "quiz_dcpmi_jinja": [
        ("Question: What colour is fresh snow?\nAnswer:", " -> WHITE"),
        ("Question: What colour is fresh snow?\nAnswer:", " -> BLACK"),
        ("Question: What colour is fresh snow?\nAnswer:", " -> GREEN"),
        ("What Answer:", " -> WHITE"),
        ("What Answer:", " -> BLACK"),
        ("What Answer:", " -> GREEN"),
    ],
    # a list doc_to_choice whose options carry their own space
    "quiz_dcpmi_list": [
        ("Question: What colour is fresh snow? Is it the first option?\nAnswer:", " yes"),
        ("Question: What colour is fresh snow? Is it the first option?\nAnswer:", " no"),
        (" Is it the first option?\nAnswer:", " yes"),
        (" Is it the first option?\nAnswer:", " no"),
    ],
}


# What each variant puts between premise (or domain premise) and option.
DELIMITERS = {"quiz_dcpmi_field": " ", "quiz_dcpmi_jinja": " -> ", "quiz_dcpmi_list": ""}


def expected_scores(sample: dict, delimiter: str, tokenizer) -> dict[str, float]:
    """Every method's 1.0/0.0 (and ``unranked``) for one logged sample, from its
    log-likelihoods alone."""
    requests, _domain_requests = conditional_and_domain(requests_of(sample))
    conditional, domain = conditional_and_domain([float(r[0][0]) for r in sample["resps"]])
    options = [continuation for _context, continuation in requests]
    gold = sample["target"]
    if isinstance(gold, str):  # the target was rendered as the option text
        gold = int(gold) if gold.isdigit() else options.index(delimiter + gold)

    def tokens(context: str, continuation: str) -> int:  # the contexts end in no whitespace
        def encode(text: str) -> int:
            return len(tokenizer.encode(text, add_special_tokens=False))

        return encode(context + continuation) - encode(context)

    n_tokens = [tokens(*request) for request in requests]
    n_chars = [len(option) - len(delimiter) for option in options]
    return expected_metrics(conditional, domain, gold, n_tokens, n_chars)


@pytest.mark.parametrize("task", list(VARIANTS))
def test_user_task_gets_every_metric(run, task):
    logged = sorted(run["samples"][task], key=lambda sample: sample["doc_id"])
    assert len(logged) == 3
    assert requests_of(logged[0]) == EXPECTED_FIRST_REQUESTS[task]
    tokenizer = counter_for_metadata(embedded_model_args()).tokenizer
    for sample in logged:
        expected = expected_scores(sample, DELIMITERS[task], tokenizer)
        assert set(ACCURACIES) < set(expected)
        assert {metric: sample[metric] for metric in expected} == expected
        assert (sample["truncated"], sample["unranked"]) == (0.0, 0.0)
    row = run["results"][task]
    assert {f"{metric},none" for metric in (*ACCURACIES, *COUNTS)} <= set(row)
    assert row["acc_dcpmi,none"] == pytest.approx(np.mean([s["acc_dcpmi"] for s in logged]))


def load(folder: Path, task: str):
    from lm_eval.tasks import TaskManager

    # only the user's folder (and the plugin's): lm-eval's own tasks take ~10 s to index
    manager = TaskManager(include_path=str(folder), include_defaults=False)
    return manager.load([task])["tasks"][task]


@pytest.mark.fast
@pytest.mark.parametrize(
    ("yaml_lines", "expected"),
    [
        ("", r"quiz_bad .*needs a domain premise.*add a line such as"),
        (
            'domain_premise: "x"\noutput_type: loglikelihood\n',
            r"needs `output_type: multiple_choice`, not 'loglikelihood'",
        ),
    ],
)
def test_misuse_is_refused_when_the_task_loads(tmp_path, yaml_lines, expected):
    bad = "include: quiz.yaml\ntask: quiz_bad\nclass: !function lm_eval_dcpmi.task.DCPMITask\n"
    write_tasks(tmp_path, {"quiz_bad": bad + yaml_lines})
    with pytest.raises(DCPMIConfigError, match=expected):
        load(tmp_path, "quiz_bad")


@pytest.mark.fast
def test_domain_premise_rendering_empty_is_refused(tmp_path):
    bad = textwrap.dedent("""\
        include: quiz.yaml
        task: quiz_bad
        class: !function lm_eval_dcpmi.task.DCPMITask
        domain_premise: "{{ '' if label == 1 else 'Answer:' }}"
    """)
    write_tasks(tmp_path, {"quiz_bad": bad})
    with pytest.raises(DCPMIConfigError, match=r"renders empty"):  # when the task is built
        load(tmp_path, "quiz_bad")
