"""DC-PMI with no domain premise written: `--dcpmi_task TASK` and a `base_task:` YAML
without `domain_premise` take each document's last word of its premise (the paper's rule,
the `{kind: last_word}` reference context's), say so in one line, record it in the
results, and `dcpmi report`, `verify` and `export` show it; the refusals.

Everything runs on a task of the user's own with local data (helpers.write_quiz), offline.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
from pathlib import Path

import pytest
import yaml
from helpers import DESCRIPTION, PREMISE, run_dcpmi, tiny_model, write_quiz

from lm_eval_dcpmi import cli
from lm_eval_dcpmi.errors import DCPMIConfigError
from lm_eval_dcpmi.task import _premise_digest as premise_digest
from lm_eval_dcpmi.task import _references as references
from lm_eval_dcpmi.task._references import ReferenceContext

DERIVED = "DC-PMI (last-word premise)"
ANNOUNCEMENT = (
    "task {task} ({source}): DC-PMI (last-word premise): no domain premise is written, so "
    "each document's is the last word of its premise (the paper's rule, `{{kind: "
    "last_word}}`); to write one instead, give {instead}."
)
# The identity of a task scored against the last word alone (references.identity_sha256).
LAST_WORD_SHA256 = hashlib.sha256(
    repr([("domain", "last_word", None), ("cf", ())]).encode()
).hexdigest()


# ------------------------------------------------------------------ the rule, read from YAML


@pytest.mark.fast
def test_the_domain_premise_is_written_or_the_last_word_rule():
    assert references.domain_reference("Answer:", "t", "t.yaml") == ReferenceContext(
        "domain", "premise", "Answer:"
    )
    assert references.domain_reference({"kind": "last_word"}, "t", "t.yaml") == (
        ReferenceContext("domain", "last_word")
    )
    for spec in ("", None, {"kind": "empty"}, {"kind": "last_word", "x": 1}):
        with pytest.raises(DCPMIConfigError) as error:
            references.domain_reference(spec, "t", "t.yaml")
        assert str(error.value) == (
            "task t (t.yaml): DC-PMI needs a domain premise; add a line such as "
            '`domain_premise: " the answer is:"` (a string or a Jinja template over the '
            "document), or `domain_premise: {kind: last_word}` for each document's last "
            f"word; got {spec!r}."
        )


@pytest.mark.fast
def test_a_derived_premise_is_recorded_by_its_rule_with_a_digest_of_its_own():
    derived = (ReferenceContext("domain", "last_word"),)
    assert references.metadata(derived, ()) == {
        "domain_premise": None,
        "domain_premise_derived": "last_word",
        "premise_sha256": LAST_WORD_SHA256,
    }
    # a written premise records no rule, and its digest is the premise's own, as before
    written = (ReferenceContext("domain", "premise", " he"),)
    assert references.metadata(written, ()) == {
        "domain_premise": " he",
        "premise_sha256": hashlib.sha256(b" he").hexdigest(),
    }
    assert premise_digest.derived_rule({"domain_premise_derived": "last_word"}) == "last_word"
    assert premise_digest.derived_rule({"domain_premise": "x"}) is None
    assert premise_digest.derived_label("last_word") == DERIVED
    assert premise_digest.derived_label("first_word") == (
        "DC-PMI (domain premise derived by 'first_word')"
    )


@pytest.mark.fast
def test_the_report_notes_dcpmi_under_the_derived_premise():
    from report_helpers import entry, results_dict

    from lm_eval_dcpmi.report._results import run_from_dict
    from lm_eval_dcpmi.report._tables import markdown_report

    data = results_dict(
        {t: entry(0.3, 0.4, 0.45, 0.5, norm=0.42) for t in ("quiz_dcpmi", "piqa_dcpmi", "mine")}
    )
    derived = {"domain_premise": None, "domain_premise_derived": "last_word"}
    data["configs"] = {
        "quiz_dcpmi": {"metadata": derived},
        "piqa_dcpmi": {"metadata": derived},
        "mine": {"metadata": {"domain_premise": "Answer:"}},
    }
    run = run_from_dict(data, None)
    assert run.derived_premises == {"quiz_dcpmi": "last_word", "piqa_dcpmi": "last_word"}
    assert (
        f"- {DERIVED} for piqa_dcpmi, quiz_dcpmi: no domain premise was written, so each "
        "document's is the last word of its premise (the paper's rule).\n"
    ) in markdown_report([run])
    del data["configs"]["quiz_dcpmi"], data["configs"]["piqa_dcpmi"]
    assert DERIVED not in markdown_report([run_from_dict(data, None)])


# ------------------------------------------------------------------ a base_task: YAML

NO_PREMISE_YAML = """\
task: quiz_dcpmi
base_task: quiz
class: !function lm_eval_dcpmi.task.DCPMITask
"""


def load(folder: Path, name: str):
    from lm_eval.tasks import TaskManager

    manager = TaskManager(include_path=str(folder), include_defaults=False)
    return manager.load([name])["tasks"][name]


def domain_pairs(task, doc_id: int) -> list[tuple[str, str]]:
    task.build_all_requests(limit=3, rank=0, world_size=1)
    pairs = [tuple(i.arguments[:2]) for i in task.instances if i.doc_id == doc_id]
    return pairs[len(pairs) // 2 :]  # the conditional requests, then the domain ones


def test_a_base_task_yaml_without_premise_takes_each_documents_last_word(tmp_path, caplog):
    folder = write_quiz(tmp_path / "tasks", by_name=False)
    (folder / "quiz_dcpmi.yaml").write_text(NO_PREMISE_YAML)
    with caplog.at_level(logging.WARNING, logger="lm_eval_dcpmi.task._derive"):
        task = load(folder, "quiz_dcpmi")
    said = [r.getMessage() for r in caplog.records if r.name == "lm_eval_dcpmi.task._derive"]
    assert said == [
        ANNOUNCEMENT.format(
            task="quiz_dcpmi",
            source=folder / "quiz_dcpmi.yaml",
            instead="a `domain_premise:` line in its YAML",
        )
    ]
    # "Q: What colour is fresh snow?\nA:": from its last space on, after the description
    assert domain_pairs(task, 0) == [
        (DESCRIPTION + " snow?\nA:", option) for option in (" => white", " => black", " => green")
    ]
    assert domain_pairs(task, 1)[0] == (DESCRIPTION + " barks?\nA:", " => a cat")
    metadata = task.dump_config()["metadata"]
    assert metadata["domain_premise"] is None
    assert metadata["domain_premise_derived"] == "last_word"
    assert metadata["premise_sha256"] == LAST_WORD_SHA256
    assert task.VERSION == f"1+premise.{LAST_WORD_SHA256[:8]}"


def test_a_written_domain_premise_always_wins(tmp_path, caplog):
    folder = write_quiz(tmp_path / "tasks", by_name=True)  # quiz_dcpmi writes "A:"
    (folder / "quiz_written.yaml").write_text(  # a DC-PMI task of its own, writing "A:"
        "include: quiz.yaml\ntask: quiz_written\nclass: !function "
        f'lm_eval_dcpmi.task.DCPMITask\ndomain_premise: "{PREMISE}"\n'
    )
    (folder / "quiz_again.yaml").write_text(  # its variant, writing none
        NO_PREMISE_YAML.replace("task: quiz_dcpmi", "task: quiz_again").replace(
            "base_task: quiz", "base_task: quiz_written"
        )
    )
    with caplog.at_level(logging.WARNING, logger="lm_eval_dcpmi.task._derive"):
        for name in ("quiz_dcpmi", "quiz_again"):  # the base's written premise is inherited
            task = load(folder, name)
            assert domain_pairs(task, 0)[0] == (DESCRIPTION + PREMISE, " => white")
            metadata = task.dump_config()["metadata"]
            assert metadata["domain_premise"] == PREMISE
            assert "domain_premise_derived" not in metadata
    assert not [r for r in caplog.records if r.name == "lm_eval_dcpmi.task._derive"]


def quiz_with_question(tmp_path: Path, question: str) -> Path:
    """The quiz whose prompt is the bare question, and whose second question is
    ``question``."""
    folder = write_quiz(tmp_path / "tasks", by_name=False)
    config = yaml.safe_load((folder / "quiz.yaml").read_text())
    config["doc_to_text"] = "{{question}}"
    (folder / "quiz.yaml").write_text(yaml.safe_dump(config))
    data = Path(config["dataset_kwargs"]["data_files"]["test"])
    rows = [json.loads(line) for line in data.read_text().splitlines()]
    rows[1]["question"] = question
    data.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return folder


NO_LAST_WORD = (
    "document 1: the domain premise is the premise's last word, but the premise "
    "(doc_to_text) {found}: it has no last word; write the domain premise instead "
    "(`domain_premise:` in the task's YAML, or --dcpmi_task TASK=PREMISE)."
)


def test_an_empty_premise_is_refused_naming_the_document(tmp_path):
    folder = quiz_with_question(tmp_path, "")
    (folder / "quiz_dcpmi.yaml").write_text(NO_PREMISE_YAML)
    with pytest.raises(DCPMIConfigError) as error:
        load(folder, "quiz_dcpmi")
    assert str(error.value) == (
        f"task quiz_dcpmi ({folder / 'quiz_dcpmi.yaml'}), " + NO_LAST_WORD.format(found="is empty")
    )


@pytest.mark.fast
def test_a_premise_that_is_no_text_has_no_last_word():
    from lm_eval_dcpmi.task._rendering import _no_last_word

    # several inputs (Winogrande's form): doc_to_text gives the gold option's index
    assert "document 1: " + _no_last_word(0) == NO_LAST_WORD.format(found="is int 0, not a text")


def test_a_whitespace_premise_stops_dcpmi_run_in_one_line(tmp_path, capsys):
    folder = quiz_with_question(tmp_path, " \n ")
    # lm-eval's dummy model: the run stops when the tasks are built, before any model
    status = cli.main(["run", "--model", "dummy", "--include_path", str(folder),
                       "--dcpmi_task", "quiz"])  # fmt: skip
    err = capsys.readouterr().err
    assert status == 2, err[-3000:]
    assert err.splitlines()[-1] == (
        f"dcpmi: task quiz_dcpmi (dcpmi run --dcpmi_task 'quiz', the DC-PMI variant of quiz "
        f"({folder / 'quiz.yaml'})), " + NO_LAST_WORD.format(found="is only whitespace (' \\n ')")
    )


# ------------------------------------------------------------------ dcpmi run and verify
# (the exports: tests/test_leaderboard.py, test_exports_name_dcpmi_under_a_derived_premise)


@pytest.fixture(scope="module")
def derived_run(tmp_path_factory) -> tuple[Path, Path]:
    """``dcpmi run --tasks quiz --dcpmi_task quiz`` (the embedded model, 3 documents,
    samples logged): the task folder and the output folder."""
    root = tmp_path_factory.mktemp("derived_run")
    folder = write_quiz(root / "tasks", by_name=False)
    output = root / "out"
    completed = run_dcpmi(
        ["--include_path", str(folder), "--tasks", "quiz", "--dcpmi_task", "quiz",
         "--limit", "3", "--log_samples", "--output_path", str(output)]
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr[-4000:]
    (root / "stdout").write_text(completed.stdout)
    (root / "stderr").write_text(completed.stderr)
    return folder, output


def results_of(output: Path) -> tuple[Path, dict]:
    (path,) = output.rglob("results_*.json")
    return path, json.loads(path.read_text())


@pytest.mark.slow
def test_dcpmi_task_alone_scores_and_records_the_derived_premise(derived_run):
    folder, output = derived_run
    stdout = (output.parent / "stdout").read_text()
    stderr = (output.parent / "stderr").read_text()
    line = ANNOUNCEMENT.format(
        task="quiz_dcpmi",
        source="dcpmi run --dcpmi_task 'quiz'",
        instead="--dcpmi_task quiz=PREMISE",
    )
    assert stderr.count(line) == 1, stderr[-4000:]  # once, though the tasks are built twice
    assert (
        f"{DERIVED} for quiz_dcpmi: no domain premise was written, so each document's is the "
        "last word of its premise (the paper's rule)." in stdout
    )
    _path, data = results_of(output)
    metadata = data["configs"]["quiz_dcpmi"]["metadata"]
    assert (metadata["domain_premise"], metadata["domain_premise_derived"]) == (None, "last_word")
    assert metadata["dcpmi_task"] == "quiz"
    assert data["versions"]["quiz_dcpmi"] == f"1+premise.{LAST_WORD_SHA256[:8]}"
    (samples,) = output.rglob("samples_quiz_dcpmi_*.jsonl")
    first = json.loads(samples.read_text().splitlines()[0])
    pairs = [(a["arg_0"], a["arg_1"]) for a in first["arguments"].values()]
    assert pairs[3:] == [
        (DESCRIPTION + " snow?\nA:", option) for option in (" => white", " => black", " => green")
    ]
    # DC-PMI picks by log P(option | premise) - log P(option | last word), by hand
    lls = [float(r[0][0]) for r in first["resps"]]
    scores = [lls[i] - lls[3 + i] for i in range(3)]
    assert first["acc_dcpmi"] == float(scores.index(max(scores)) == 0)  # gold: white


def verify(capsys, *args: str) -> tuple[int, str]:
    """``dcpmi verify ARGS``: its status, and what it printed (the findings on stderr)."""
    status = cli.main(["verify", *args])
    captured = capsys.readouterr()
    return status, captured.out + captured.err


@pytest.mark.slow
def test_verify_rebuilds_the_derived_premise_and_catches_a_forged_record(
    derived_run, tmp_path, capsys
):
    folder, output = derived_run
    status, out = verify(capsys, str(output), "--include_path", str(folder))
    assert status == 0, out
    assert f"quiz_dcpmi: 3 documents rebuilt and recomputed, {DERIVED} (" in out
    # the record says a written premise was scored: the task built again says otherwise
    forged = tmp_path / "written"
    shutil.copytree(output, forged)
    path, data = results_of(forged)
    metadata = data["configs"]["quiz_dcpmi"]["metadata"]
    metadata["domain_premise"] = PREMISE
    del metadata["domain_premise_derived"]
    path.write_text(json.dumps(data))
    status, out = verify(capsys, str(forged), "--include_path", str(folder))
    assert status == 1
    assert (
        f"{path} (quiz_dcpmi): records domain_premise 'A:', but the task built here has None "
        f"({DERIVED})" in out
    )
    assert "records domain_premise_derived None, but the task built here has 'last_word'" in out
    # the option rewritten to a written premise: the requests built again differ
    forged = tmp_path / "option"
    shutil.copytree(output, forged)
    path, data = results_of(forged)
    data["configs"]["quiz_dcpmi"]["metadata"]["dcpmi_task"] = f"quiz={PREMISE}"
    path.write_text(json.dumps(data))
    status, out = verify(capsys, str(forged), "--include_path", str(folder))
    assert status == 1
    assert "records domain_premise None, but the task built here has 'A:'" in out
    assert "records domain_premise_derived 'last_word', but the task built here has None" in out


@pytest.mark.slow
def test_shards_of_a_derived_premise_task_merge(tmp_path, capsys):
    """`dcpmi merge` builds each task again to bound the shards' counts: a --dcpmi_task
    variant from the option its shards record (a tiny random-weight model scores them)."""
    folder = write_quiz(tmp_path / "tasks", by_name=False)
    config = yaml.safe_load((folder / "quiz.yaml").read_text())
    config["metric_list"] = config["metric_list"][:2]  # merge aggregates the plugin's metrics
    (folder / "quiz.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    model = tiny_model(tmp_path / "model")
    # the base task beside its variant: refused before anything scores (merge could not
    # merge a plain lm-eval task's shards)
    status = cli.main(
        ["run", "--model", "hf", "--model_args", f"pretrained={model}",
         "--include_path", str(folder), "--tasks", "quiz", "--dcpmi_task", "quiz",
         "--shard", "1/2", "--output_path", str(tmp_path / "refused")]
    )  # fmt: skip
    err = capsys.readouterr().err
    assert status == 2 and not (tmp_path / "refused").exists()
    assert (
        "--shard 1/2: 'quiz' is no DC-PMI task, and dcpmi merge, which recomputes every "
        "number from the DC-PMI metrics, could not merge its shards; score it in a run of its "
        "own, unsharded (for a --dcpmi_task variant, leave its base task out of --tasks)."
    ) in err
    for k in (1, 2):  # the variant alone
        status = cli.main(
            ["run", "--model", "hf", "--model_args", f"pretrained={model}",
             "--include_path", str(folder),
             "--dcpmi_task", "quiz", "--shard", f"{k}/2", "--log_samples",
             "--output_path", str(tmp_path / f"shard{k}")]
        )  # fmt: skip
        assert status == 0, capsys.readouterr().err[-3000:]
    status = cli.main(
        ["merge", str(tmp_path / "shard1"), str(tmp_path / "shard2"), "--out",
         str(tmp_path / "merged"), "--include_path", str(folder), "--tokenizer", str(model)]
    )  # fmt: skip
    assert status == 0, capsys.readouterr().err[-3000:]
    _path, data = results_of(tmp_path / "merged")
    assert data["configs"]["quiz_dcpmi"]["metadata"]["domain_premise_derived"] == "last_word"
