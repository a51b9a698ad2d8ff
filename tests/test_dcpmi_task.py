"""DCPMITask: request construction, token counts, request grouping and misuse errors."""

from __future__ import annotations

import logging
import math

import pytest
from helpers import DOCS, embedded_model_args, load_task, make_task
from lm_eval.api.instance import Instance

from lm_eval_dcpmi.errors import DCPMIConfigError
from lm_eval_dcpmi.rules import _scoring as scoring
from lm_eval_dcpmi.task._dcpmi_task import DCPMITask
from lm_eval_dcpmi.task._tokens import token_counter_for


def test_token_counts_follow_the_harness_split(task_manager, hf_lm):
    """TokenCounter agrees with HFLM._encode_pair, including trailing-space contexts."""
    copa = load_task(task_manager, "dcpmi_copa")
    counter = copa._token_counter()
    pairs = [
        (" My body cast a shadow over the grass because", " the sun was rising."),
        (" because", " the grass was cut."),
        (" article text\n ", "  _ is the answer"),  # RACE cloze: context ends in '\n '
        ("x", "<|endoftext|>"),
        (" The quote has a tone that is", " negative\n"),
    ]
    for context, continuation in pairs:
        context_enc, continuation_enc = hf_lm._encode_pair(context, continuation)
        assert counter.split(context, continuation) == (len(context_enc), len(continuation_enc))
    assert counter.max_length == hf_lm.max_length == 8192


@pytest.mark.fast
def test_no_tokenizer_gives_none_not_a_guess():
    assert token_counter_for(tokenizer=None, pretrained=None) is None


@pytest.mark.fast
def test_domain_requests_follow_the_conditional_ones_with_the_same_continuations():
    task = make_task()  # target_delimiter defaults to " " here, as in any lm-eval task
    task.build_all_requests(limit=1)
    requests = task.instances
    assert [r.arguments for r in requests] == [
        ("Two plus two is", " four"),
        ("Two plus two is", " five"),
        (" The answer:", " four"),
        (" The answer:", " five"),
    ]
    assert [r.idx for r in requests] == [0, 1, 2, 3]


@pytest.mark.fast
def test_domain_premise_is_a_template_over_the_document():
    task = make_task(domain_premise="{{ question.split()[-1] }}:")
    assert task.domain_premise(task.eval_docs[1]) == "is:"


@pytest.mark.fast
def test_process_results_without_a_tokenizer(caplog):
    task = make_task()
    with caplog.at_level("WARNING"):
        task.build_all_requests(limit=2)
    doc = task.eval_docs[1]  # gold 1
    # conditional: option 0 more likely; domain: option 0 far more likely -> DC-PMI picks 1
    results = [(-2.0, False), (-3.0, False), (-1.0, False), (-6.0, False)]
    metrics = task.process_results(doc, results)
    assert {k: metrics[k] for k in ("acc", "acc_unc", "acc_dcpmi")} == {
        "acc": 0.0,
        "acc_unc": 0.0,
        "acc_dcpmi": 1.0,
    }
    assert metrics["acc_avg"] != metrics["acc_avg"]  # NaN: no tokenizer, no guess
    assert "acc_avg needs the model's tokenizer" in caplog.text


@pytest.mark.fast
def test_metrics_are_the_task_defaults_plus_ours_with_their_aggregations():
    task = make_task()
    # lm-eval's defaults for multiple choice first (acc, acc_norm), then the table's
    names = list(task.aggregation())
    assert names[:2] == ["acc", "acc_norm"]
    ours = (*scoring.METHODS, *scoring.MEASURES, *scoring.COUNTS)
    assert names[2:] == [m for m in ours if m not in names[:2]]
    assert [n for n in names if n in ("acc_unc", "acc_avg", "acc_dcpmi", "truncated")] == [
        "acc_unc", "acc_avg", "acc_dcpmi", "truncated"
    ]  # fmt: skip
    assert task.aggregation()["acc_dcpmi"]([1.0, 0.0, 1.0, 1.0]) == 0.75
    assert task.aggregation()["truncated"]([1.0, 0.0, 2.0]) == 3.0  # a count: summed
    assert {
        m: v
        for m, v in task.higher_is_better().items()
        if m in names[:2] or m in ("acc_unc", "acc_avg", "acc_dcpmi", "truncated", "unranked")
    } == {
        "acc": True,
        "acc_norm": True,
        "acc_unc": True,
        "acc_avg": True,
        "acc_dcpmi": True,
        "truncated": False,
        "unranked": False,
    }


@pytest.mark.fast
def test_a_metric_list_of_the_task_is_kept():
    task = make_task(metric_list=[{"metric": "brier_score", "higher_is_better": False}])
    assert list(task.aggregation())[:2] == ["brier_score", "acc_unc"]
    task.build_all_requests(limit=2)
    results = [(-1.0, False), (-3.0, False), (-0.5, False), (-4.0, False)]
    metrics = task.process_results(task.eval_docs[0], results)  # gold 0; DC-PMI: -0.5 < 1.0
    # lm-eval's own per-document value (0.4: a (gold, probabilities) pair; 0.5: the score),
    # of the conditional requests alone, aggregated by lm-eval's own aggregation
    p_gold = 1 / (1 + math.exp(-2.0))  # softmax of (-1, -3)
    brier = task.aggregation()["brier_score"]([metrics["brier_score"]])
    assert brier == pytest.approx((1 - p_gold) ** 2 + (1 - p_gold) ** 2)
    assert metrics["acc"] == 1.0 and metrics["acc_dcpmi"] == 0.0


@pytest.mark.fast
def test_acc_mutual_info_is_refused_with_the_reason():
    with pytest.raises(DCPMIConfigError, match=r"tiny_dcpmi .*acc_mutual_info.*DC-PMI replaces"):
        make_task(metric_list=[{"metric": "acc_mutual_info"}])


@pytest.mark.fast
def test_missing_domain_premise_is_refused():
    with pytest.raises(
        DCPMIConfigError, match=r"tiny_dcpmi .*needs a domain premise.*domain_premise:"
    ):
        make_task(domain_premise=None)


@pytest.mark.fast
def test_output_type_other_than_multiple_choice_is_refused():
    with pytest.raises(
        DCPMIConfigError, match=r"needs `output_type: multiple_choice`, not 'loglikelihood'"
    ):
        make_task(output_type="loglikelihood")


@pytest.mark.fast
def test_domain_premise_rendering_empty_for_one_document_stops_the_task_build():
    with pytest.raises(DCPMIConfigError, match=r"tiny_dcpmi .*document 1: .*renders empty"):
        make_task(domain_premise="{{ '' if question == 'The sky is' else 'A:' }}")


@pytest.mark.fast
def test_target_outside_the_options_stops_the_task_build_naming_the_document():
    # (lm-eval itself checks only the first document; a later bad one must not pass
    # silently, and must stop the run when the task is built, before any request)
    with pytest.raises(
        DCPMIConfigError, match=r"tiny_dcpmi .*document 1: target 5 .*not an option index in 0..1"
    ):
        make_task(doc_to_target="{{ 5 if question == 'The sky is' else 0 }}")


def test_identical_domain_requests_cost_one_forward_row(hf_lm, monkeypatch):
    """lm-eval's `hf` groups requests with equal tokens: 8 domain requests, 2 distinct."""
    rows = []
    model_call = hf_lm._model_call

    def counting_model_call(inputs, *args, **kwargs):
        rows.append(inputs.shape[0])
        return model_call(inputs, *args, **kwargs)

    monkeypatch.setattr(hf_lm, "_model_call", counting_model_call)
    domain = " The quote has a tone that is"
    pairs = [(domain, " negative\n"), (domain, " positive\n")] * 4
    requests = [
        Instance(request_type="loglikelihood", doc={}, arguments=pair, idx=i)
        for i, pair in enumerate(pairs)
    ]
    results = hf_lm.loglikelihood(requests)
    assert sum(rows) == 2
    assert results[0] == results[2] == results[4] == results[6]
    assert results[1] == results[7]


@pytest.mark.fast
def test_documents_without_finite_scores_are_counted_wrong_with_one_warning(caplog):
    task = make_task()
    task.build_all_requests(limit=2)
    no_score = [(float("-inf"), False)] * 2 + [(-1.0, False), (-2.0, False)]
    with caplog.at_level("WARNING", logger="lm_eval_dcpmi.task._dcpmi_task"):
        first = task.process_results(task.eval_docs[0], no_score)  # gold 0
        second = task.process_results(task.eval_docs[1], [(float("nan"), False)] * 4)
    # gold is option 0, yet LM must not "pick" it: no finite score, no prediction
    assert (first["acc"], first["acc_norm"], first["acc_dcpmi"]) == (0.0, 0.0, 0.0)
    assert first["acc_unc"] == 1.0  # the domain scores are finite
    assert first["unranked"] == second["unranked"] == 1.0
    assert task.aggregation()["unranked"]([first["unranked"], second["unranked"]]) == 2.0
    warnings = [r.getMessage() for r in caplog.records if "no finite score" in r.getMessage()]
    assert len(warnings) == 1 and "tiny_dcpmi" in warnings[0]


# ------------------------------------------- every document checked when the task is built


@pytest.mark.fast
def test_a_premise_field_the_document_lacks_is_named_when_the_task_is_built():
    # lm-eval's Jinja environment is strict: an undefined field raises, it never renders ''
    with pytest.raises(DCPMIConfigError) as raised:
        make_task(domain_premise="{{ topic }} Answer:")
    message = str(raised.value)
    assert message.startswith("task tiny_dcpmi (its YAML), document 0: the domain premise")
    assert "'{{ topic }} Answer:' uses a field the document lacks: 'topic' is undefined" in message
    assert "the document's fields: gold, options, question" in message


@pytest.mark.fast
def test_a_premise_that_is_not_a_jinja_template_is_refused_naming_the_task():
    with pytest.raises(
        DCPMIConfigError,
        match=r"task tiny_dcpmi \(its YAML\): the domain premise '\{\{ topic ' is not a valid "
        r"Jinja template",
    ):
        make_task(domain_premise="{{ topic ")


@pytest.mark.fast
def test_a_template_failing_on_a_later_document_is_named_when_the_task_is_built():
    # lm-eval tries its templates on the first document only
    with pytest.raises(
        DCPMIConfigError,
        match=r"tiny_dcpmi \(its YAML\), document 1: doc_to_target uses a field the document "
        r"lacks: 'missing' is undefined",
    ):
        make_task(doc_to_target="{{ gold if question == 'Two plus two is' else missing }}")


@pytest.mark.fast
def test_duplicate_and_single_options_warn_once_per_task_naming_the_first_document(caplog):
    docs = [
        *DOCS,
        {"question": "Red is a", "options": ["colour", "colour", "sound"], "gold": 1},
        {"question": "Blue is a", "options": ["colour"], "gold": 0},
        {"question": "Green is a", "options": ["sound", "sound"], "gold": 0},
        {"question": "Cyan is a", "options": ["hue"], "gold": 0},
    ]
    with caplog.at_level("WARNING", logger="lm_eval_dcpmi"):
        make_task(docs=docs)
    messages = [r.getMessage() for r in caplog.records]
    duplicates = [m for m in messages if "duplicate options" in m]
    single = [m for m in messages if "a single option" in m]
    assert len(duplicates) == len(single) == 1
    assert duplicates[0].startswith("tiny_dcpmi (its YAML): 2 documents have duplicate options")
    assert "(first: document 2, 'colour' twice)" in duplicates[0]
    assert "lowest-index tie rule" in duplicates[0]
    assert single[0].startswith("tiny_dcpmi (its YAML): 2 documents have a single option")
    assert "(first: document 3)" in single[0]


@pytest.mark.fast
def test_the_task_version_carries_the_domain_premise():
    # lm-eval's task_hashes hash the first request only; the version tells the premises apart
    first, again, other = make_task(), make_task(), make_task(domain_premise=" So:")
    assert first.VERSION == again.VERSION
    assert first.VERSION.startswith("1+premise.") and len(first.VERSION) == len("1+premise.") + 8
    assert other.VERSION != first.VERSION and other.VERSION.startswith("1+premise.")
    assert first.config.metadata["version"] == 1  # the YAML's own number is kept


# ------------------------------------------------------------- options and the window


def cats(n: int) -> str:
    return " ".join(["cat"] * n)  # ' cat' is one token each for SmolLM2


def window_task(option: str, window: int = 8) -> DCPMITask:
    docs = [{"question": "Two plus two is", "options": ["four", option], "gold": 0}]
    metadata = {"version": 1, **embedded_model_args(), "max_length": window}
    return make_task(docs=docs, metadata=metadata)


def test_an_option_of_exactly_the_window_passes_one_token_more_is_refused(hf_lm, monkeypatch):
    window, context = 8, "Two plus two is"
    assert len(hf_lm._encode_pair(context, " " + cats(window))[1]) == window
    # lm-eval's own condition (HFLM._loglikelihood_tokens): continuation <= max_length
    monkeypatch.setattr(hf_lm, "_max_length", window)
    request = Instance("loglikelihood", {}, (context, " " + cats(window)), 0)
    assert hf_lm.loglikelihood([request])[0][0] < 0
    over = Instance("loglikelihood", {}, (context, " " + cats(window + 1)), 0)
    with pytest.raises(AssertionError):  # lm-eval's bare assert, after the model loaded
        hf_lm.loglikelihood([over])

    window_task(cats(window)).build_all_requests()
    task = window_task(cats(window + 1))  # within the early check's margin: exact at build
    with pytest.raises(DCPMIConfigError) as raised:
        task.build_all_requests()
    message = str(raised.value)
    assert message.startswith("task tiny_dcpmi (its YAML), document 0: option 1 (' cat cat")
    assert (
        "is 9 tokens long in its conditional request, more than the model's window of 8 tokens"
        in message
    )
    assert "raise max_length in --model_args" in message


def test_an_option_far_longer_than_the_window_stops_the_task_build():
    with pytest.raises(DCPMIConfigError) as raised:
        window_task(cats(40))
    message = str(raised.value)
    assert message.startswith("task tiny_dcpmi (its YAML), document 0: option 1 (' cat cat")
    assert "is 40 tokens long on its own, more than the model's window of 8 tokens" in message


@pytest.mark.fast
def test_several_processes_that_each_score_everything_are_warned_once(monkeypatch, caplog):
    from lm_eval_dcpmi.task import _dcpmi_task as task_module

    def warnings() -> list[str]:
        found = [r.getMessage() for r in caplog.records]
        return [m for m in found if "every process will score the whole run" in m]

    monkeypatch.setattr(task_module, "_WARNED_WORLD", [])
    task = make_task()
    monkeypatch.setenv("WORLD_SIZE", "2")
    with caplog.at_level(logging.WARNING, logger="lm_eval_dcpmi"):
        task.build_all_requests(limit=1, rank=0, world_size=2)  # real sharding: quiet
        assert not warnings()
        task.build_all_requests(limit=1, rank=0, world_size=1)
        task.build_all_requests(limit=1, rank=0, world_size=1)
    assert len(warnings()) == 1 and "WORLD_SIZE=2" in warnings()[0]
    monkeypatch.setenv("WORLD_SIZE", "1")
    monkeypatch.setattr(task_module, "_WARNED_WORLD", [])
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="lm_eval_dcpmi"):
        task.build_all_requests(limit=1, rank=0, world_size=1)
    assert not warnings()


@pytest.mark.fast
def test_each_premise_is_rendered_once_and_the_requests_use_the_checked_strings(monkeypatch):
    # A Jinja domain premise over the document: the checks at task build render it for
    # every document; building the requests renders none again and uses those strings.
    from lm_eval_dcpmi.task import _rendering as rendering

    calls = []
    render = rendering.premise_text

    def counted(task, reference, doc, doc_id=None):
        calls.append(doc["question"])
        return render(task, reference, doc, doc_id)

    monkeypatch.setattr(rendering, "premise_text", counted)
    task = make_task(domain_premise=" About {{question.split()[0]}}:")
    assert len(task.rendered_premises) == len(DOCS)
    assert task.rendered_premises.get(DOCS[1], "domain") == " About The:"
    built = len(calls)
    task.build_all_requests(limit=None, rank=0, world_size=1)
    assert len(calls) == built  # no premise rendered again
    contexts = [i.arguments[0] for i in task.instances if i.doc_id == 1]
    assert contexts == ["The sky is", "The sky is", " About The:", " About The:"]
