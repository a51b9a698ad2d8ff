"""DC-PMI in the ways people run lm-eval: chat templates, few-shot, request cache, shards,
resumed runs, bad input found before the model runs. Runs the real harness (lm-eval's
Python API) on the embedded model, loaded once for the session."""

from __future__ import annotations

import json
import logging
import math
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import embedded_model_args, evaluate, load_task, quiz_manager, write_quiz_task
from lm_eval.api.model import CacheHook
from lm_eval.tasks import TaskManager
from recompute import expected_metrics

from lm_eval_dcpmi import task_configs_dir
from lm_eval_dcpmi._harness._logged import logged_loglikelihood
from lm_eval_dcpmi.errors import DCPMIConfigError
from lm_eval_dcpmi.rules._layout import conditional_and_domain
from lm_eval_dcpmi.rules._scoring import ACCURACIES, COUNTS, batch_calibrated

SYSTEM = "You complete sentences about causes and effects."


def pairs_of(sample: dict) -> list[tuple[str, str]]:
    return [tuple(arguments[:2]) for arguments in sample["arguments"]]


def recompute(sample: dict, n_tokens: list[int]) -> dict[str, float]:
    lls = [float(logged_loglikelihood(response)) for response in sample["filtered_resps"]]
    conditional, domain = conditional_and_domain(lls)
    n_chars = [len(option) for _context, option in conditional_and_domain(pairs_of(sample))[0]]
    return expected_metrics(conditional, domain, sample["doc"]["gold"], n_tokens, n_chars)


def metrics_of(results: dict, task: str) -> dict[str, float]:
    row = results["results"][task]
    return {metric: row[f"{metric},none"] for metric in (*ACCURACIES, *COUNTS)}


# ------------------------------------------------------------------ chat templates


@pytest.mark.api
@pytest.mark.usefixtures("data_dir")
def test_chat_template_wraps_the_domain_premise_like_the_premise(hf_lm):
    results = evaluate(
        hf_lm, ["dcpmi_copa"], limit=2, apply_chat_template=True, system_instruction=SYSTEM
    )
    samples = results["samples"]["dcpmi_copa"]
    assert len(samples) == 2
    for sample in samples:
        conditional, domain_pairs = conditional_and_domain(pairs_of(sample))
        bridge = " because" if sample["doc"]["asks_for"] == "cause" else " so"
        expected_domain = hf_lm.apply_chat_template(
            [{"role": "system", "content": SYSTEM}, {"role": "user", "content": bridge}]
        )
        n_tokens = []
        for (context, continuation), (domain, domain_continuation) in zip(
            conditional, domain_pairs, strict=True
        ):
            assert context.startswith("<|im_start|>system\n" + SYSTEM)
            assert context.endswith("<|im_end|>\n<|im_start|>assistant\n")
            assert domain == expected_domain
            assert domain.endswith("<|im_end|>\n<|im_start|>assistant\n")
            assert continuation == domain_continuation
            # after lm-eval moves trailing whitespace, both score the very same tokens
            _, continuation_tokens = hf_lm._encode_pair(context, continuation)
            assert hf_lm._encode_pair(domain, continuation)[1] == continuation_tokens
            assert hf_lm.tok_decode(continuation_tokens).startswith("\n ")
            n_tokens.append(len(continuation_tokens))
        expected = recompute(sample, n_tokens)
        assert {m: sample[m] for m in expected} == expected


def test_without_chat_template_the_domain_premise_is_plain(hf_lm, task_manager):
    copa = load_task(task_manager, "dcpmi_copa")
    copa.build_all_requests(limit=1, system_instruction=SYSTEM)
    contexts = [instance.arguments[0] for instance in copa.instances]
    # the system instruction precedes the premise and the domain premise alike
    assert (
        contexts
        == [SYSTEM + " My body cast a shadow over the grass because"] * 2
        + [SYSTEM + " because"] * 2
    )


# ------------------------------------------------------------------------- few-shot


@pytest.mark.api
@pytest.mark.usefixtures("data_dir")
def test_few_shot_examples_precede_the_premise_but_not_the_domain_premise(hf_lm):
    results = evaluate(hf_lm, ["dcpmi_copa"], limit=2, num_fewshot=2)
    for sample in results["samples"]["dcpmi_copa"]:
        conditional, domain = conditional_and_domain(pairs_of(sample))
        bridge = " because" if sample["doc"]["asks_for"] == "cause" else " so"
        premise = sample["doc"]["p"][:-1] + bridge
        for context, _continuation in conditional:
            examples, _, last = context.rpartition("\n\n")
            assert last == " " + premise
            assert examples.count("\n\n") == 1  # two examples, each with its answer
            assert sample["doc"]["p"] not in examples  # never the test item itself
        assert {context for context, _ in domain} == {bridge}


# ------------------------------------------------------------------- request cache


@pytest.fixture
def request_cache(tmp_path, monkeypatch) -> Path:
    import lm_eval.caching.cache as cache

    monkeypatch.setattr(cache, "PATH", str(tmp_path))
    return tmp_path


@pytest.mark.api
@pytest.mark.usefixtures("data_dir")
def test_cached_requests_give_the_same_metrics_and_token_counts(hf_lm, request_cache, caplog):
    first = evaluate(hf_lm, ["dcpmi_copa"], limit=3, cache_requests=True)
    assert list(request_cache.glob("requests-dcpmi_copa-*")), "lm-eval wrote no request cache"
    with caplog.at_level(logging.WARNING, logger="lm_eval_dcpmi"):
        second = evaluate(hf_lm, ["dcpmi_copa"], limit=3, cache_requests=True)
    assert metrics_of(second, "dcpmi_copa") == metrics_of(first, "dcpmi_copa")
    assert not math.isnan(metrics_of(second, "dcpmi_copa")["acc_avg"])
    assert metrics_of(second, "dcpmi_copa")["truncated"] == 0.0
    assert not [r for r in caplog.records if r.name.startswith("lm_eval_dcpmi")]


def write_premise_quiz(
    folder: Path,
    domain_premise: str,
    targets=(0, 1, 0),
    doc_to_text: str = "Question: {{q}}\nAnswer:",
    target_delimiter: str = " ",
) -> Path:
    questions = [("Two plus two is", ["four", "five"]), ("The sky is", ["green", "blue"])]
    questions.append(("Ice is", ["cold", "hot"]))
    rows = [
        {"q": q, "options": options, "gold": gold}
        for (q, options), gold in zip(questions, targets, strict=True)
    ]
    return write_quiz_task(
        folder,
        "quiz_dcpmi",
        rows,
        dcpmi=True,
        doc_to_text=doc_to_text,
        doc_to_choice="{{options}}",
        doc_to_target="gold",
        target_delimiter=target_delimiter,
        domain_premise=domain_premise,
        metadata={"version": 1.0},
    )


def quiz_tasks(folder: Path) -> TaskManager:
    return quiz_manager(folder, metadata=embedded_model_args())


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("\nAnswer:", "\nThe answer is:"),
        ("\nAnswer:", "Answer:"),  # the new premise occurs inside the old context
        ("The answer is:", "answer is:"),
    ],
)
def test_a_cached_request_with_another_domain_premise_is_detected(
    tmp_path, request_cache, old, new
):
    write_premise_quiz(tmp_path, old)
    load_task(quiz_tasks(tmp_path), "quiz_dcpmi").build_all_requests(limit=2, cache_requests=True)

    write_premise_quiz(tmp_path, new)  # the YAML changes, the cache key does not
    with pytest.raises(DCPMIConfigError) as raised:
        task = load_task(quiz_tasks(tmp_path), "quiz_dcpmi")
        task.build_all_requests(limit=2, cache_requests=True)
    message = str(raised.value)
    assert message.startswith(f"task quiz_dcpmi ({tmp_path / 'quiz_dcpmi.yaml'}), document 0: ")
    assert f"the cached domain request's context {old!r} differs from the one the task " in message
    assert f"builds now, {new!r}: lm-eval read stale requests from its request cache" in message
    assert message.endswith("Rerun once with `--cache_requests refresh`.")
    # refreshing the cache, as the message says, rebuilds them
    task = load_task(quiz_tasks(tmp_path), "quiz_dcpmi")
    task.build_all_requests(limit=2, cache_requests=True, rewrite_requests_cache=True)
    assert task.instances[2].arguments[0] == new


@pytest.mark.parametrize(
    ("change", "part", "was", "now"),
    [
        ({"doc_to_text": "Q: {{q}}\nAnswer:"}, "context", "Question: Two", "Q: Two"),
        ({"target_delimiter": "  "}, "continuation", "' four'", "'  four'"),
    ],
)
def test_a_cached_conditional_request_that_differs_is_detected(
    tmp_path, request_cache, change, part, was, now
):
    write_premise_quiz(tmp_path, "\nAnswer:")
    load_task(quiz_tasks(tmp_path), "quiz_dcpmi").build_all_requests(limit=2, cache_requests=True)
    write_premise_quiz(tmp_path, "\nAnswer:", **change)
    task = load_task(quiz_tasks(tmp_path), "quiz_dcpmi")
    with pytest.raises(DCPMIConfigError) as raised:
        task.build_all_requests(limit=2, cache_requests=True)
    message = str(raised.value)
    assert "document 0: the cached conditional request's " + part in message
    assert was in message and now in message
    assert message.endswith("Rerun once with `--cache_requests refresh`.")


def test_cached_requests_of_other_documents_than_the_run_evaluates_are_refused(
    tmp_path, request_cache
):
    # lm-eval's cache ignores --samples: it would hand document 0's requests to document 2
    write_premise_quiz(tmp_path, "\nAnswer:")
    load_task(quiz_tasks(tmp_path), "quiz_dcpmi").build_all_requests(cache_requests=True)
    task = load_task(quiz_tasks(tmp_path), "quiz_dcpmi")
    with pytest.raises(DCPMIConfigError) as raised:
        task.build_all_requests(samples=[2], cache_requests=True)
    message = str(raised.value)
    assert "the request cache holds requests for 3 documents, this run evaluates 1" in message
    assert message.endswith("Rerun once with `--cache_requests refresh`.")


# --------------------------------------------------- bad input stops before the model


def test_a_bad_target_stops_the_run_before_the_model_is_called(tmp_path, hf_lm, monkeypatch):
    write_premise_quiz(tmp_path, "\nAnswer:", targets=(0, 1, 7))
    calls = []
    monkeypatch.setattr(hf_lm, "_model_call", lambda *a, **k: calls.append(a))
    with pytest.raises(DCPMIConfigError) as raised:
        evaluate(hf_lm, ["quiz_dcpmi"], task_manager=quiz_tasks(tmp_path))
    message = str(raised.value)
    assert "quiz_dcpmi" in message and str(tmp_path / "quiz_dcpmi.yaml") in message
    assert "document 2: target 7 is not an option index in 0..1" in message
    assert calls == []


def test_per_document_faults_stop_the_task_load_naming_yaml_document_and_field(tmp_path):
    # TaskManager.load builds the task: `dcpmi run` does that before it loads the model
    yaml = write_premise_quiz(tmp_path, "\nAnswer:", targets=(0, 1, 7))
    with pytest.raises(DCPMIConfigError) as raised:
        load_task(quiz_tasks(tmp_path), "quiz_dcpmi")
    assert str(raised.value).startswith(f"task quiz_dcpmi ({yaml}), document 2: target 7 ")

    write_premise_quiz(tmp_path, "{{ topic }} Answer:")
    with pytest.raises(DCPMIConfigError) as raised:
        load_task(quiz_tasks(tmp_path), "quiz_dcpmi")
    message = str(raised.value)
    assert message.startswith(f"task quiz_dcpmi ({yaml}), document 0: the domain premise")
    assert "uses a field the document lacks: 'topic' is undefined" in message
    assert "the document's fields: gold, options, q" in message


def test_a_tokenizer_that_cannot_be_loaded_stops_the_build(task_manager, tmp_path):
    manager = TaskManager(
        include_path=str(task_configs_dir()),
        include_defaults=False,
        metadata={"pretrained": str(tmp_path / "nothing")},
    )
    with pytest.raises(DCPMIConfigError, match=r"tokenizer.*could not be loaded.*nothing"):
        load_task(manager, "dcpmi_copa").build_all_requests(limit=1)


@pytest.mark.slow
def test_plain_lm_eval_ends_a_bad_config_with_one_message(tmp_path):
    write_premise_quiz(tmp_path, "\nAnswer:", targets=(0, 9, 0))
    # The task load fails before any request: lm-eval's dummy model spares loading one.
    command = [
        str(Path(sys.executable).with_name("lm_eval")),
        "--model", "dummy", "--include_path", str(tmp_path), "--tasks", "quiz_dcpmi",
    ]  # fmt: skip
    completed = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert completed.returncode == 1
    assert "Traceback" not in completed.stderr
    last_lines = completed.stderr.strip().splitlines()[-2:]
    assert last_lines[0].startswith("lm-eval-dcpmi: error: task quiz_dcpmi (")
    assert "document 1: target 9 is not an option index in 0..1" in last_lines[0]
    assert last_lines[1] == "(set LM_EVAL_DCPMI_TRACEBACK=1 for the traceback)"


# ------------------------------------------------------------------- shards (ranks)


@pytest.mark.api
@pytest.mark.parametrize("name", ["dcpmi_copa", "dcpmi_sst5"])
def test_documents_split_across_ranks_score_as_in_one_process(hf_lm, task_manager, name):
    def per_document(rank: int, world_size: int) -> dict[int, dict[str, float]]:
        task = load_task(task_manager, name)
        task.build_all_requests(limit=6, rank=rank, world_size=world_size)
        answers = hf_lm.loglikelihood(task.instances)
        by_doc: dict[int, list] = {}
        for instance, answer in zip(task.instances, answers, strict=True):
            instance.resps.append(answer)  # as lm-eval's evaluator does
            by_doc.setdefault(instance.doc_id, []).append((instance.idx, instance.doc, answer))
        scores = {}
        for doc_id, rows in by_doc.items():
            rows.sort(key=lambda row: row[0])
            scores[doc_id] = task.process_results(rows[0][1], [row[2] for row in rows])
        return scores

    whole = per_document(0, 1)
    split = {**per_document(0, 2), **per_document(1, 2)}
    assert sorted(whole) == sorted(split) == list(range(6))
    if "acc_bc" in whole[0]:  # decided over every rank's documents, gathered
        items = [[document["acc_bc"] for document in run.values()] for run in (whole, split)]
        assert batch_calibrated(items[1]) == pytest.approx(batch_calibrated(items[0]))
    for doc_id in whole:
        for metric, value in whole[doc_id].items():
            if metric == "acc_bc":
                continue  # a per-document item (0.5 wraps it as one repeat's), checked above
            if not isinstance(value, float) or not math.isnan(value):
                assert split[doc_id][metric] == pytest.approx(value, abs=1e-6), (doc_id, metric)


# ------------------------------------------------------------------------- resuming


@pytest.mark.usefixtures("data_dir")
def test_use_cache_resumes_an_interrupted_run_with_the_same_metrics(hf_lm, tmp_path, monkeypatch):
    cache = str(tmp_path / "answers")
    model_call = hf_lm._model_call
    calls = []

    def interrupted_after_one_batch(inputs, *args, **kwargs):
        calls.append(inputs.shape[0])
        if len(calls) > 1:
            raise KeyboardInterrupt  # what Ctrl-C does in the middle of scoring
        return model_call(inputs, *args, **kwargs)

    try:
        monkeypatch.setattr(hf_lm, "_model_call", interrupted_after_one_batch)
        with pytest.raises(KeyboardInterrupt):
            evaluate(hf_lm, ["dcpmi_copa"], limit=4, use_cache=cache)
        assert len(calls) == 2  # one batch scored and stored, the second interrupted

        calls.clear()
        monkeypatch.setattr(
            hf_lm,
            "_model_call",
            lambda inputs, *a, **k: (calls.append(inputs.shape[0]), model_call(inputs, *a, **k))[1],
        )
        resumed = evaluate(hf_lm, ["dcpmi_copa"], limit=4, use_cache=cache)
        assert 0 < sum(calls) < 16  # only the requests the interrupted run had not stored
    finally:
        hf_lm.set_cache_hook(CacheHook(None))  # the session's model stops writing the db
    monkeypatch.setattr(hf_lm, "_model_call", model_call)
    uninterrupted = evaluate(hf_lm, ["dcpmi_copa"], limit=4)
    assert metrics_of(resumed, "dcpmi_copa") == metrics_of(uninterrupted, "dcpmi_copa")


@pytest.mark.api
# ------------------------------------------------------------- predict only, identity


@pytest.mark.usefixtures("data_dir")
def test_predict_only_logs_both_requests_and_reports_no_metrics(hf_lm):
    # lm-eval's --predict_only: simple_evaluate calls task.override_metric("bypass")
    results = evaluate(hf_lm, ["dcpmi_copa"], limit=3, predict_only=True)
    row = results["results"]["dcpmi_copa"]
    assert not [key for key in row if key.split(",")[0] in (*ACCURACIES, *COUNTS)]
    samples = results["samples"]["dcpmi_copa"]
    assert len(samples) == 3
    for sample in samples:
        # none of the plugin's (lm-eval 0.5 logs its own placeholder, as for every task)
        assert set(sample["metrics"]) <= {"bypass"}
        assert len(sample["resps"]) == 4  # two options: conditional and domain requests
        assert all(math.isfinite(float(resp[0][0])) for resp in sample["resps"])
        assert {context for context, _ in pairs_of(sample)[2:]} <= {" because", " so"}


def test_editing_the_domain_premise_changes_the_recorded_task_identity(hf_lm, tmp_path):
    from lm_eval.loggers import EvaluationTracker

    recorded = []
    for number, premise in enumerate(["\nAnswer:", "Answer:"]):
        folder = tmp_path / f"run{number}"
        folder.mkdir()
        write_premise_quiz(folder, premise)
        results = evaluate(hf_lm, ["quiz_dcpmi"], task_manager=quiz_tasks(folder), limit=2)
        samples = results.pop("samples")
        tracker = EvaluationTracker(output_path=str(folder / "out"))
        tracker.save_results_aggregated(results=results, samples=samples)
        (path,) = (folder / "out").rglob("results_*.json")
        recorded.append(json.loads(path.read_text()))
    first, second = recorded
    assert first["configs"]["quiz_dcpmi"]["metadata"]["domain_premise"] == "\nAnswer:"
    assert second["configs"]["quiz_dcpmi"]["metadata"]["domain_premise"] == "Answer:"
    assert first["versions"]["quiz_dcpmi"].startswith("1.0+premise.")
    assert first["versions"]["quiz_dcpmi"] != second["versions"]["quiz_dcpmi"]
    # lm-eval's task hash covers the first (conditional) request only: blind to the premise
    assert first["task_hashes"]["quiz_dcpmi"] == second["task_hashes"]["quiz_dcpmi"]
