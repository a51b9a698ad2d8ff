"""The lm-eval glue: a multiple-choice task that also scores each option after reference contexts.

A task YAML opts in with ``class: !function lm_eval_dcpmi.task.DCPMITask`` and a
``domain_premise:`` (or ``base_task:``, see ``_derive``); ``_references`` reads the other
reference contexts and content-free fields it may declare. For every option the task
sends lm-eval's request ``(premise, option)`` and one ``(reference context, option)`` per
reference context; the first document a process builds also carries the content-free
requests (``layout``). A premise-like reference context is built by lm-eval's prompt
builder with it in place of the document's text (system instruction, description, chat
template; no few-shot examples, the authors' rule) and the premise's trailing whitespace,
so every request of an option scores the same continuation. Documents are checked when
the task is built (``checks``), token counts and cached requests when the requests are
built; ``process_results`` then only combines numbers (``scoring``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from typing import Any

from lm_eval.api.instance import Instance

from lm_eval_dcpmi import __version__
from lm_eval_dcpmi._harness import (
    document_metrics,
    loglikelihood_answer,
    loglikelihood_request,
    own_metrics,
    quiet_custom_dataset_advice,
    task_class,
    unsupported_task_form,
)
from lm_eval_dcpmi.data import loading_json, task_data_files
from lm_eval_dcpmi.errors import (
    DataError,
    DCPMIConfigError,
    DCPMIError,
    offline_errors,
    offline_fix,
)
from lm_eval_dcpmi.rules import (
    DOMAIN,
    METHODS,
    TIED_DOMAIN,
    TRUNCATED,
    UNRANKED,
    DocumentScores,
    Layout,
    Metric,
    accuracies,
    dcpmi_metric_list,
    measures,
    register_metrics,
    task_metrics,
)
from lm_eval_dcpmi.task import _document_checks as checks
from lm_eval_dcpmi.task import (
    _premise_digest as premise_digest,
)
from lm_eval_dcpmi.task import (
    _references as references,
)
from lm_eval_dcpmi.task import (
    _rendering as rendering,
)
from lm_eval_dcpmi.task import (
    _request_checks as request_checks,
)
from lm_eval_dcpmi.task._derive import base_task_refusal, with_base_task
from lm_eval_dcpmi.task._document_store import DocumentScoring, PendingDocuments, document_key
from lm_eval_dcpmi.task._tokens import (
    TokenCounter,
    counter_for_metadata,
    literal_special_token_warnings,
)

log = logging.getLogger(__name__)


# lm-eval advises every task with a custom_dataset on its kwargs; the plugin's own tasks'
# loaders take the data folder from --metadata already, as the README says.
quiet_custom_dataset_advice("dcpmi_")


def _trailing_whitespace(text: str) -> str:
    return text[len(text.rstrip()) :]


class DCPMITask(task_class()):  # lm-eval's ConfigurableTask
    """``ConfigurableTask`` for multiple choice, plus reference-context requests and metrics."""

    def __init__(self, config: dict[str, Any] | None = None, **kwargs: Any) -> None:
        config = dict(config or {})
        config.pop("class", None)
        given = config
        if "base_task" in config:
            config = with_base_task(config, DCPMITask)
        name = config.get("task", "<unnamed task>")
        self.config_source = (config.get("metadata") or {}).get("config_source", "its YAML")
        references.check_task_name(name, self.config_source)
        self.references = references.reference_contexts(config, name, self.config_source)
        self.content_free_fields = references.content_free_fields(config, name, self.config_source)
        for key in ("domain_premise", "reference_contexts", "content_free_fields"):
            config.pop(key, None)
        self.domain_premise_template = self.references[0].template
        if config.get("output_type") != "multiple_choice":
            raise DCPMIConfigError(
                f"task {name} ({self.config_source}): DC-PMI scores options, so it needs "
                f"`output_type: multiple_choice`, not {config.get('output_type')!r}."
            )
        self.layout = Layout(
            tuple(r.name for r in self.references),
            references.CONTENT_FREE_INPUTS if self.content_free_fields else (),
        )
        self.metrics = task_metrics(self.layout.references, bool(self.content_free_fields))
        register_metrics(self.metrics)
        # What the task scores against goes into its metadata, so results files show it.
        config["metadata"] = {
            **(config.get("metadata") or {}),
            **references.metadata(self.references, self.content_free_fields),
        }
        try:
            config["metric_list"] = dcpmi_metric_list(config.get("metric_list"), self.metrics)
        except DCPMIConfigError as err:
            raise DCPMIConfigError(f"task {name} ({self.config_source}): {err}") from None
        self.premise_templates = {
            r.name: rendering.compile_premise(r.template, name, self.config_source, r.name)
            for r in self.references
            if r.kind == "premise"
        }
        self._pending = PendingDocuments()
        self._tied: set[str] = set()  # documents (by key) whose domain requests are conditional
        self.build_options: dict[str, Any] = {}
        self._carrier_due = False  # the next document built carries the content-free requests
        self._content_free: dict[str, list[float]] | None = None  # their scores, once known
        self._warned_unranked = False
        self._warned_fewshot_split = False
        self._n_constructed = 0  # construct_requests calls: none when lm-eval read its cache
        self._metric_override: str | None = None
        self._last_choices: tuple[Any, Any] = (None, None)  # (document, its options)
        try:
            super().__init__(config=config, **kwargs)
        except DCPMIError:
            raise
        except Exception as error:
            # a variant of a task lm-eval cannot build either: say that its base is at fault
            refusal = base_task_refusal(given, error) if "base_task" in given else None
            if refusal is None:
                raise
            raise refusal from error
        # Results name a task by its version: an edited premise must not pass for the old.
        identity = references.identity_sha256(self.references, self.content_free_fields)
        self.VERSION = premise_digest.premise_versioned(self.VERSION, identity)
        unsupported = unsupported_task_form(self)
        if unsupported is not None:
            raise DCPMIConfigError(f"task {name} ({self.config_source}): {unsupported}")
        # Every document lm-eval may evaluate, now: `dcpmi run` builds the tasks before it
        # loads the model; plain `lm_eval` builds them after, before any request.
        self.rendered_premises = checks.check_documents(
            self, counter_for_metadata(self.config.metadata)
        )

    def download(self, dataset_kwargs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        # a user's JSON file the datasets library cannot read: one line naming the file
        try:
            with loading_json(self.config.task, self.config_source, self.config):
                super().download(dataset_kwargs, **kwargs)
        except offline_errors() as err:  # a Hub dataset, neither cached nor reachable
            raise DataError(
                f"task {self.config.task} ({self.config_source}): its dataset "
                f"{self.config.dataset_path!r} could not be loaded ({type(err).__name__}: "
                f"{err}). {offline_fix()}"
            ) from None
        # Which plugin and which data files made the numbers: results files show it, and
        # `dcpmi verify` compares the files at hand with these digests.
        self.config.metadata = {
            **(self.config.metadata or {}),
            "dcpmi_version": __version__,
            "data_files": task_data_files(self.config),
        }

    # ---- building requests ----------------------------------------------------------

    def build_all_requests(self, *, system_instruction: str | None = None, **kwargs: Any) -> None:
        # construct_requests is not told the system instruction (nor the few-shot options
        # the content-free prompts need), and is skipped altogether when lm-eval reads the
        # requests from its cache (--cache_requests): keep them, and check and count after
        # either path.
        self.build_options = {
            "system_instruction": system_instruction,
            "apply_chat_template": kwargs.get("apply_chat_template", False),
            "fewshot_as_multiturn": kwargs.get("fewshot_as_multiturn", False),
            "chat_template": kwargs.get("chat_template"),
        }
        self._content_free = None
        warn_if_every_process_scores_everything(kwargs.get("world_size", 1))
        if not self._warned_fewshot_split:
            warning = checks.fewshot_split_warning(self)
            if warning is not None:
                log.warning(warning)
                self._warned_fewshot_split = True
        constructed = self._n_constructed
        self._carrier_due = bool(self.layout.content_free)
        super().build_all_requests(system_instruction=system_instruction, **kwargs)
        if self._n_constructed == constructed and self.instances:
            # lm-eval read them from its cache, whose key ignores the task's config, the
            # data and --samples: they count only if they are the requests built now.
            cached = self.instances
            kwargs["cache_requests"] = False
            self._carrier_due = bool(self.layout.content_free)
            super().build_all_requests(system_instruction=system_instruction, **kwargs)
            request_checks.check_cached_requests(self, cached, self.instances)
        self._prepare_scoring()

    def construct_requests(self, doc: dict, ctx: Any, **kwargs: Any) -> list[Instance]:
        self._n_constructed += 1
        conditional = super().construct_requests(doc, ctx, **kwargs)
        contexts = [self.reference_context(r, doc) for r in self.references]
        if self._carrier_due:
            self._carrier_due = False
            contexts += [self.content_free_context(doc, text) for text in self.layout.content_free]
        requests = list(conditional)
        for reference in contexts:
            for request in conditional:
                context, continuation = request.arguments[:2]
                # lm-eval moves a context's trailing whitespace into the continuation: give
                # the reference context the premise's, so both score the same text; the
                # empty context stays empty (lm-eval then conditions on its prefix token).
                if reference:
                    pair = (reference.rstrip() + _trailing_whitespace(context), continuation)
                else:
                    pair = ("", _trailing_whitespace(context) + continuation)
                requests.append(
                    loglikelihood_request(
                        request, doc, (*pair, *request.arguments[2:]), len(requests), kwargs
                    )
                )
        return requests

    def domain_premise(self, doc: dict, doc_id: int | None = None) -> str:
        """The rendered domain premise for ``doc`` (never blank)."""
        return self.premise_text(self.references[0], doc, doc_id)

    def premise_text(
        self, reference: references.ReferenceContext, doc: dict, doc_id: int | None = None
    ) -> str:
        """What stands in for the document's text in ``reference`` (``_rendering``)."""
        return rendering.premise_text(self, reference, doc, doc_id)

    def reference_context(
        self, reference: references.ReferenceContext, doc: dict, doc_id: int | None = None
    ) -> str:
        """The reference context of ``doc`` as lm-eval's prompt builder makes it."""
        return rendering.reference_context(self, reference, doc, doc_id)

    def content_free_context(self, doc: dict, text: str) -> str:
        """The task's prompt with ``text`` in every content-free field (CC)."""
        return rendering.content_free_context(self, doc, text)

    def doc_to_choice(self, doc: Any, doc_to_choice: Any = None) -> list[str]:
        # Building one document's requests asks for its options several times, and
        # lm-eval compiles a Jinja doc_to_choice on every call: keep the last document's.
        if doc_to_choice is not None:
            return super().doc_to_choice(doc, doc_to_choice)
        last_doc, choices = self._last_choices
        if last_doc is not doc:
            choices = super().doc_to_choice(doc)
            self._last_choices = (doc, choices)
        return list(choices) if isinstance(choices, list) else choices

    # ---- checks and token counts, before the model runs -----------------------------

    def _prepare_scoring(self) -> None:
        counter = self._token_counter()
        by_doc: dict[int, list[Instance]] = {}
        for instance in self.instances:
            by_doc.setdefault(instance.doc_id, []).append(instance)
        self._pending = PendingDocuments()
        self._tied = set()
        tied: list[tuple[int, dict, str]] = []
        scored_texts: set[str] = set()  # options and reference contexts, for the token check
        for doc_id, requests in by_doc.items():
            requests.sort(key=lambda r: r.idx)
            doc = requests[0].doc
            entry = self._document_scoring(doc, doc_id, requests, counter)
            self._pending.add(doc, entry)
            pairs = [tuple(r.arguments[:2]) for r in requests]
            if DOMAIN in self.layout.tied(pairs, entry.n_options, entry.carrier):
                self._tied.add(document_key(doc))
                tied.append((doc_id, doc, requests[0].arguments[0]))
            scored_texts.update(r.arguments[1] for r in requests)
            scored_texts.update(r.arguments[0] for r in requests[entry.n_options :])
        if tied:
            self._warn_tied(tied, len(by_doc))
        if counter is not None:
            for warning in literal_special_token_warnings(
                scored_texts, counter.tokenizer, self.config.task, self.config_source
            ):
                log.warning(warning)

    def _warn_tied(self, tied: list[tuple[int, dict, str]], n: int) -> None:
        """Documents whose domain requests are their conditional requests (the same
        context: a written premise that renders as the prompt, a premise that is its own
        last word): DC-PMI scores every option 0 on them, and the tie rule's option 0 is no
        pick of the method's. Counted by ``TIED_DOMAIN``; said once per build."""
        doc_id, doc, context = tied[0]
        source = f" ({doc['source']})" if isinstance(doc, dict) and doc.get("source") else ""
        log.warning(
            "%s (%s): %d of %d documents have domain requests that are their conditional "
            "requests (first: document %d%s, context %s): DC-PMI scores every option 0 there "
            "and the tie rule picks option 0, which says nothing of the method. Their number "
            "is the task's `%s` metric, and `dcpmi report` marks DC-PMI beside it. Write a "
            "domain premise that is not the premise (`domain_premise:` in the task's YAML, or "
            "--dcpmi_task TASK=PREMISE).",
            self.config.task, self.config_source, len(tied), n, doc_id, source,
            rendering.shown(context), TIED_DOMAIN,
        )  # fmt: skip

    def _document_scoring(
        self, doc: dict, doc_id: int, requests: list[Instance], counter: TokenCounter | None
    ) -> DocumentScoring:
        # The options and target were checked when the task was built; the gold index
        # is needed again here.
        choices = checks.document_choices(self, doc, doc_id)
        gold = checks.gold_index(self, doc, doc_id, choices)
        n = len(choices)
        carrier = bool(self.layout.content_free) and len(requests) == self.layout.n_requests(
            n, carrier=True
        )
        if len(requests) != self.layout.n_requests(n, carrier):  # a safeguard
            raise rendering.fault(self, doc, doc_id, f"{len(requests)} requests for {n} options.")
        if counter is None:
            return DocumentScoring(gold, n, carrier, None, float("nan"), tuple(requests[:n]))
        counts = [counter.split(*request.arguments[:2]) for request in requests]
        request_checks.check_token_counts(
            self, doc, doc_id, requests, counts, counter.max_length, n, carrier
        )
        truncated = sum(n_ctx + n_cont > counter.max_length + 1 for n_ctx, n_cont in counts)
        n_tokens = tuple(n_cont for _n_ctx, n_cont in counts[:n])
        return DocumentScoring(gold, n, carrier, n_tokens, float(truncated), tuple(requests[:n]))

    def _token_counter(self) -> TokenCounter | None:
        counter = counter_for_metadata(self.config.metadata)
        if counter is None:
            log.warning(
                "%s: acc_avg needs the model's tokenizer and none is known (no `pretrained` or "
                "`tokenizer` in the model args or --metadata); acc_avg and truncated are NaN.",
                self.config.task,
            )
        return counter

    # ---- scoring --------------------------------------------------------------------

    def aggregation(self) -> dict:
        found = dict(super().aggregation())
        for metric in self.metrics:
            if metric.corpus is not None and metric.name in found:
                found[metric.name] = self._corpus_aggregation(metric)
        return found

    def _corpus_aggregation(self, metric: Metric) -> Callable[[list], float]:
        def aggregate(items: list) -> float:
            return self._corpus_aggregate(metric, items)

        return aggregate

    def _corpus_aggregate(self, metric: Metric, items: list) -> float:
        """A corpus rule over every process's documents, with a warning when they are few."""
        rule, n = metric.corpus, len(items)
        assert rule is not None  # only corpus metrics get here
        if n == 1:
            log.warning(
                "%s: %s rests on 1 document: %s. Evaluate %d documents or more for a "
                "meaningful %s.",
                self.config.task,
                metric.name,
                rule.one_document,
                rule.min_documents,
                metric.name,
            )
        elif 0 < n < rule.min_documents:
            log.warning(
                "%s: %s rests on %d documents, fewer than %d: %s. Evaluate more documents "
                "for a meaningful %s.",
                self.config.task,
                metric.name,
                n,
                rule.min_documents,
                rule.few_documents,
                metric.name,
            )
        return rule.aggregate(items)

    def override_metric(self, metric_name: str) -> None:
        """lm-eval's ``--predict_only`` calls ``override_metric("bypass")``: from then on the
        task reports lm-eval's own results for the conditional requests alone (for a
        multiple-choice task: none), and the samples still log every request's answer."""
        super().override_metric(metric_name)
        self._metric_override = metric_name

    def _content_free_scores(self) -> dict[str, list[float]] | None:
        if self._content_free is None and self.layout.content_free:
            self._content_free = carrier_scores(self.layout, self.instances)
            if self._content_free is None:  # a safeguard: build_all_requests adds them
                raise DCPMIConfigError(
                    f"task {self.config.task}: no document carries the content-free requests."
                )
        return self._content_free

    def process_results(self, doc: dict, results: list[tuple[float, bool]]) -> dict[str, Any]:
        entry = self._pending.pop(doc)
        if entry is None:
            raise DCPMIConfigError(
                f"task {self.config.task}: results for a document whose requests this task "
                "did not build; build_all_requests must run first."
            )
        conditional_results = results[: entry.n_options]
        # The task's own metrics (acc_norm, brier_score, ...) from lm-eval's code, on the
        # conditional requests alone; the plugin's rules override acc and acc_norm with
        # the same values wherever every score is finite.
        own = own_metrics(
            self,
            doc,
            conditional_results,
            entry.conditional,
            super().process_results,
            skip=[metric.name for metric in self.metrics],
        )
        if self._metric_override is not None:
            return own
        blocks = self.layout.blocks([ll for ll, _ in results], entry.n_options, entry.carrier)
        scores = DocumentScores(
            conditional=blocks.conditional,
            references=blocks.references,
            n_tokens=entry.n_tokens,
            n_chars=[len(choice) for choice in self.doc_to_choice(doc)],
            content_free=self._content_free_scores(),
        )
        values: dict[str, Any] = accuracies(scores, entry.gold, self.metrics)
        values.update(measures(scores, self.metrics))
        for metric in self.metrics:  # decided over the task: the document logs its item
            if metric.corpus is not None:
                values[metric.name] = metric.corpus.item(scores, entry.gold)
        if values[UNRANKED] and not self._warned_unranked:
            self._warned_unranked = True
            log.warning(
                "%s: some documents have no finite score (NaN or -inf) for any option under "
                "some method (first: %s); that method counts them as wrong, never as a pick of "
                "option 0. Their number is the task's `unranked` metric.",
                self.config.task,
                doc.get("source", "a document") if isinstance(doc, dict) else "a document",
            )
        tied = float(document_key(doc) in self._tied)
        return document_metrics({**own, **values, TRUNCATED: entry.truncated, TIED_DOMAIN: tied})


__all__ = ["METHODS", "DCPMIConfigError", "DCPMITask", "dcpmi_metric_list"]


# ---- said once per process: how lm-eval splits a run's documents across processes

_WARNED_WORLD: list[bool] = []


def warn_if_every_process_scores_everything(world_size: int) -> None:
    """lm-eval's `hf` shards documents only across several GPUs: under `torchrun` or
    `accelerate launch` on the CPU (or one GPU) every process is rank 0 of 1 and scores the
    whole run. Said once per process."""
    launched = os.environ.get("WORLD_SIZE", "1")
    if launched.isdecimal() and int(launched) > 1 and world_size == 1 and not _WARNED_WORLD:
        _WARNED_WORLD.append(True)
        log.warning(
            "%s processes were started (WORLD_SIZE=%s) but the model reports a world size "
            "of 1: lm-eval's hf splits documents only across several GPUs, so every process "
            "will score the whole run. Start one process (see docs/harness.md, several GPUs).",
            launched,
            launched,
        )


# ---- the content-free scores of contextual calibration (CC), read once a process's
# requests are answered, from the one document that carries the content-free requests


def carrier_scores(layout: Layout, instances: Sequence[Instance]) -> dict[str, list[float]] | None:
    """The content-free log-likelihoods of the document that carries them, read from a
    process's answered instances (lm-eval scores every request before it calls
    ``process_results``); None when no document carries them."""
    by_doc: dict[int, list[Instance]] = {}
    for instance in instances:
        by_doc.setdefault(instance.doc_id, []).append(instance)
    for requests in by_doc.values():
        requests.sort(key=lambda r: r.idx)
        n, carrier = layout.n_options([r.arguments[1] for r in requests])
        if carrier:
            answers = [loglikelihood_answer(r) for r in requests]
            return layout.blocks(answers, n, True).content_free
    return None
