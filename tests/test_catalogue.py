"""The catalogue sweep (``lm_eval_dcpmi.task._catalogue``, scripts/sweep_catalogue.py):
``--dcpmi_task TASK`` on every multiple-choice task of the installed lm-eval's index,
from its config alone. None may be an error; each refusal is one line; under the lm-eval
that made results/catalogue/'s record, the sweep must give the record's very numbers.

Marked ``api`` (it runs lm-eval's own index and task classes, where releases differ), so
the other releases' tiers run it too. One index build and every task's config: ~35-50 s
on 2 cores, so not ``fast``.
"""

from __future__ import annotations

import json

import pytest
from helpers import LM_EVAL_05, ROOT

from lm_eval_dcpmi.task._catalogue import derive_one, markdown, reason_of, record_name, sweep

RECORDS = ROOT / "results" / "catalogue"


@pytest.fixture(scope="module")
def swept():
    return sweep()


@pytest.mark.api
def test_every_multiple_choice_task_is_ready_or_refused_in_one_line(swept):
    counts = swept.counts()
    assert counts["multiple_choice"] == len(swept.outcomes) > 8000
    assert {o.task: o.message for o in swept.outcomes if o.status == "error"} == {}
    assert {o.status for o in swept.outcomes} <= {"ready", "refused"}
    for outcome in swept.outcomes:
        if outcome.status == "refused":
            assert outcome.reason, outcome.task
            assert outcome.message.startswith(
                f"task {outcome.task}_dcpmi (dcpmi run --dcpmi_task {outcome.task!r}): "
            ), outcome.message
            assert "\n" not in outcome.message
    by_name = {o.task: o for o in swept.outcomes}
    # lm-eval's arc_easy, with the last-word premise; the plugin's COPA keeps its own
    assert by_name["arc_easy"].status == "ready"
    assert by_name["arc_easy"].shapes == {
        "domain_premise": "last word",
        "prompt": "template",
        "options": "template",
        "process_docs": "none",
        "num_fewshot": "none",
        "process_results": "none",
        # lm-eval 0.5's TaskConfig says it (multiple_inputs: false); 0.4 decides from data
        "several_inputs": "no" if LM_EVAL_05 else "unknown",
    }
    assert by_name["dcpmi_copa"].status == "ready"
    assert by_name["dcpmi_copa"].shapes["domain_premise"] == "written (the base's)"
    assert by_name["dcpmi_copa"].origin == "plugin"


@pytest.mark.api
def test_the_record_of_this_lm_eval_is_current(swept):
    path = RECORDS / f"{record_name(swept.lm_eval_version)}.json"
    if not path.is_file():
        made = sorted(p.name for p in RECORDS.glob("*.json"))
        pytest.skip(f"no record for lm-eval {swept.lm_eval_version} (records: {made})")
    record = json.loads(path.read_text(encoding="utf-8"))
    regenerate = "; regenerate it: .venv/bin/python scripts/sweep_catalogue.py"
    assert swept.counts() == record["counts"], f"{path} is stale{regenerate}"
    assert path.with_suffix(".md").read_text(encoding="utf-8") == markdown(
        record["counts"], record["seconds"]
    ), f"{path.with_suffix('.md')} is stale{regenerate}"


# ------------------------------------------------------------------ the fix it found


QUIZ_YAML = (
    "task: {name}\ndataset_path: json\ndataset_kwargs: {{data_files: {{test: q.jsonl}}}}\n"
    "test_split: test\noutput_type: multiple_choice\ndoc_to_text: {prompt}\n"
    "doc_to_choice: [yes, no]\ndoc_to_target: 0\n"
)


@pytest.fixture(scope="module")
def broken_tasks(tmp_path_factory):
    """Two tasks of a user's own that lm-eval cannot build either, in a manager of their
    folder alone (no index of lm-eval's tasks to build)."""
    from lm_eval.tasks import TaskManager

    tasks = tmp_path_factory.mktemp("tasks")
    (tasks / "broken_utils.py").write_text("import dcpmi_no_such_module  # noqa: F401\n")
    (tasks / "broken_quiz.yaml").write_text(
        QUIZ_YAML.format(name="broken_quiz", prompt="!function broken_utils.doc_to_text")
    )
    (tasks / "unmeasured_quiz.yaml").write_text(
        QUIZ_YAML.format(name="unmeasured_quiz", prompt="'{{question}}'")
        + "metric_list:\n  - aggregation: mean\n"  # no `metric:`, which lm-eval needs
    )
    manager = TaskManager(include_path=str(tasks), include_defaults=False)
    return tasks, manager


@pytest.mark.api
def test_a_base_task_that_does_not_load_is_refused_naming_the_error(broken_tasks, tmp_path):
    """Before, lm-eval's ImportError from a base task's `!function` module (26 of lm-eval
    0.4.13's tasks import what is not installed, or is gone: `datasets.load_metric`)
    passed up through `--dcpmi_task` as a traceback."""
    tasks, manager = broken_tasks
    status, reason, message, config = derive_one("broken_quiz", tmp_path, manager)
    assert (status, reason, config) == (
        "refused",
        "the base task does not load: ModuleNotFoundError: No module named 'dcpmi_no_such_module'",
        None,
    )
    assert message == (
        "task broken_quiz_dcpmi (dcpmi run --dcpmi_task 'broken_quiz'): base task "
        f"'broken_quiz' does not load ({tasks / 'broken_quiz.yaml'}): ModuleNotFoundError: "
        "No module named 'dcpmi_no_such_module'; lm-eval cannot build the base task itself "
        "either: fix what its YAML names (a `!function` module and what that imports) or "
        "derive another task."
    )


@pytest.mark.api
def test_a_base_task_lm_eval_cannot_build_is_refused_naming_lm_evals_error(broken_tasks, tmp_path):
    """Before, lm-eval 0.5.0.dev1's ValueError on 13 of its own tasks (`aggregation: f1`,
    which it registers as a metric only) passed up through `--dcpmi_task` as a traceback;
    here a metric_list entry without `metric:`, which every release refuses."""
    tasks, manager = broken_tasks
    status, reason, message, config = derive_one("unmeasured_quiz", tmp_path, manager)
    assert (status, config) == ("refused", None)
    lm_evals = message.partition("): ")[2].partition(" either (")[2].partition("): ")[2]
    assert message == (
        "task unmeasured_quiz_dcpmi (dcpmi run --dcpmi_task 'unmeasured_quiz'): lm-eval "
        f"cannot build the base task 'unmeasured_quiz' either ({tasks / 'unmeasured_quiz.yaml'}"
        f"): {lm_evals}"
    )
    assert lm_evals.startswith("ValueError: ") and lm_evals.endswith(
        "; fix its YAML or derive another task."
    )
    assert reason == "lm-eval cannot build the base task either: " + lm_evals.removesuffix(
        "; fix its YAML or derive another task."
    )


@pytest.mark.fast
def test_refusals_are_counted_by_their_reason():
    source = "task x_dcpmi (dcpmi run --dcpmi_task 'x'): "
    assert reason_of(
        source + "base task 'x' does not load (/a/b (c)/x.yaml): ImportError: cannot import "
        "name 'load_metric' from 'datasets' (/lib/datasets/__init__.py); lm-eval cannot build "
        "the base task itself either: ..."
    ) == ("the base task does not load: ImportError: cannot import name 'load_metric' from "
          "'datasets'")  # fmt: skip
    assert reason_of(source + "base task 'x' is the Python task class 'X' (...)") == (
        "a Python task class"
    )
    assert (
        reason_of(
            source + "base task 'x' does not load (/t/x.yaml): AttributeError: Module "
            "'/lib/x/utils.py' has no function 'f' (from YAML in /lib/x); lm-eval cannot build the "
            "base task itself..."
        )
        == "the base task does not load: AttributeError: Module '<file>' has no function 'f'"
    )
    assert reason_of(source + "something new.") == "something new."
