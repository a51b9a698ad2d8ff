"""The lm-eval glue: a multiple-choice task that also scores each option after a domain premise.

A task YAML opts in with two lines::

    class: !function lm_eval_dcpmi.task.DCPMITask
    domain_premise: " the answer is:"      # a Jinja template over the document

(or starts from a registered task with ``base_task: arc_easy``, see ``derive``).
For every option the task sends lm-eval's usual request ``(premise, option)`` and a
second one ``(domain context, option)``. The domain context is built by lm-eval's own
prompt builder with the domain premise in place of the document's text: the same system
instruction, description and chat template, no few-shot examples (the authors' rule),
and the premise's trailing whitespace, so that both requests score the very same
continuation text. Every document of the evaluation split is checked when the task is
built (``doc_checks``); the token counts are taken, and requests read from lm-eval's
request cache compared with the task's own, when the requests are built, before the model
runs; ``process_results`` then only combines numbers (``scoring.accuracies``).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from lm_eval import utils as lm_utils
from lm_eval.api.instance import Instance
from lm_eval.api.task import ConfigurableTask

from lm_eval_dcpmi import data, doc_checks
from lm_eval_dcpmi.derive import with_base_task
from lm_eval_dcpmi.errors import DCPMIConfigError
from lm_eval_dcpmi.layout import conditional_and_domain
from lm_eval_dcpmi.metrics import dcpmi_metric_list
from lm_eval_dcpmi.scoring import METHODS, accuracies
from lm_eval_dcpmi.tokens import (
    TokenCounter,
    counter_for_metadata,
    literal_special_token_warnings,
)

log = logging.getLogger(__name__)


def affix(value: str, before: str = "", after: str = "") -> str:
    """Jinja filter: ``options | map('affix', ' "', '"') | list`` wraps every option."""
    return f"{before}{value}{after}"


# lm-eval renders every template with this one Jinja environment (it registers
# its own `regex_replace` filter the same way).
lm_utils.env.filters.setdefault("affix", affix)


class _QuietOwnDatasets(logging.Filter):
    """Drops lm-eval's per-task advice on custom_dataset kwargs for the plugin's own tasks
    (their loaders take the data folder from --metadata already, as the README says)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not (message.startswith("dcpmi_") and ": Custom kwargs can be passed" in message)


logging.getLogger("lm_eval.api.task").addFilter(_QuietOwnDatasets())


@dataclass(frozen=True)
class DocumentScoring:
    """What ``process_results`` needs of a document beyond its loglikelihoods."""

    gold: int
    n_tokens: tuple[int, ...] | None  # per option, in the conditional request
    truncated: float  # requests (of 2 per option) cut from the left; NaN without tokenizer


class PendingDocuments:
    """Per-document scoring inputs from request building until ``process_results``.

    lm-eval hands ``process_results`` the document, not its id, so entries are keyed by
    the document's content; each entry is dropped once used.
    """

    def __init__(self) -> None:
        self._by_doc: dict[str, list[DocumentScoring]] = {}

    @staticmethod
    def _key(doc: dict) -> str:
        return json.dumps(doc, sort_keys=True, default=str)

    def add(self, doc: dict, scoring: DocumentScoring) -> None:
        self._by_doc.setdefault(self._key(doc), []).append(scoring)

    def pop(self, doc: dict) -> DocumentScoring | None:
        entries = self._by_doc.get(self._key(doc))
        if not entries:
            return None
        scoring = entries.pop(0)
        if not entries:
            del self._by_doc[self._key(doc)]
        return scoring

    def __len__(self) -> int:
        return sum(len(entries) for entries in self._by_doc.values())


def _trailing_whitespace(text: str) -> str:
    return text[len(text.rstrip()) :]


def premise_version(version: Any, domain_premise: str) -> str:
    """The task's version as results record it: the YAML's number and the domain premise's
    digest (lm-eval's ``task_hashes`` see the conditional requests only)."""
    digest = hashlib.sha256(domain_premise.encode("utf-8")).hexdigest()[:8]
    return f"{version}+premise.{digest}"


class DCPMITask(ConfigurableTask):
    """``ConfigurableTask`` for multiple choice, plus domain-premise requests and metrics."""

    def __init__(self, config: dict[str, Any] | None = None, **kwargs: Any) -> None:
        config = dict(config or {})
        config.pop("class", None)
        if "base_task" in config:
            config = with_base_task(config, DCPMITask)
        name = config.get("task", "<unnamed task>")
        self._source = (config.get("metadata") or {}).get("config_source", "its YAML")
        self.domain_premise_template = config.pop("domain_premise", None)
        if not isinstance(self.domain_premise_template, str) or not self.domain_premise_template:
            raise DCPMIConfigError(
                f"task {name} ({self._source}): DC-PMI needs a domain premise; add a line such "
                'as `domain_premise: " the answer is:"` (a string or a Jinja template over '
                "the document)."
            )
        if config.get("output_type") != "multiple_choice":
            raise DCPMIConfigError(
                f"task {name} ({self._source}): DC-PMI scores options, so it needs "
                f"`output_type: multiple_choice`, not {config.get('output_type')!r}."
            )
        # The domain premise goes into the task's metadata, so results files show it.
        config["metadata"] = {
            **(config.get("metadata") or {}),
            "domain_premise": self.domain_premise_template,
        }
        try:
            config["metric_list"] = dcpmi_metric_list(config.get("metric_list"))
        except DCPMIConfigError as err:
            raise DCPMIConfigError(f"task {name} ({self._source}): {err}") from None
        self._premise = doc_checks.compile_premise(self.domain_premise_template, name, self._source)
        self._rendering_domain = False  # read by doc_to_text, which __init__ calls
        self._pending = PendingDocuments()
        self._system_instruction: str | None = None
        self._warned_unranked = False
        self._n_constructed = 0  # construct_requests calls: none when lm-eval read its cache
        self._metric_override: str | None = None
        self._last_choices: tuple[Any, Any] = (None, None)  # (document, its options)
        super().__init__(config=config, **kwargs)
        # Results name a task by its version: an edited premise must not pass for the old.
        self.VERSION = premise_version(self.VERSION, self.domain_premise_template)
        # Every document lm-eval may evaluate, now: `dcpmi run` builds the tasks before it
        # loads the model; plain `lm_eval` builds them after, before any request.
        doc_checks.check_documents(self, counter_for_metadata(self.config.metadata))

    def download(self, dataset_kwargs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        # a user's JSON file the datasets library cannot read: one line naming the file
        with data.loading_json(self.config.task, self._source, self.config):
            super().download(dataset_kwargs, **kwargs)

    # ---- building requests ----------------------------------------------------------

    def build_all_requests(self, *, system_instruction: str | None = None, **kwargs: Any) -> None:
        # construct_requests is not told the system instruction, and is skipped altogether
        # when lm-eval reads the requests from its cache (--cache_requests): keep the
        # instruction for the domain context, and check and count after either path.
        self._system_instruction = system_instruction
        doc_checks.warn_fewshot_from_eval_split(self)
        constructed = self._n_constructed
        super().build_all_requests(system_instruction=system_instruction, **kwargs)
        if self._n_constructed == constructed and self.instances:
            # lm-eval read them from its cache, whose key ignores the task's config, the
            # data and --samples: they count only if they are the requests built now.
            cached = self.instances
            kwargs["cache_requests"] = False
            super().build_all_requests(system_instruction=system_instruction, **kwargs)
            doc_checks.check_cached_requests(self, cached, self.instances)
        self._prepare_scoring()

    def construct_requests(self, doc: dict, ctx: Any, **kwargs: Any) -> list[Instance]:
        self._n_constructed += 1
        conditional = super().construct_requests(doc, ctx, **kwargs)
        domain_context = self.domain_context(
            doc,
            apply_chat_template=kwargs.get("apply_chat_template", False),
            chat_template=kwargs.get("chat_template"),
        )
        instance_kwargs = {
            k: v for k, v in kwargs.items() if k not in ("apply_chat_template", "chat_template")
        }
        domain_requests = []
        for request in conditional:
            context, continuation = request.arguments[:2]
            # lm-eval moves a context's trailing whitespace into the continuation: give the
            # domain context the premise's, so both requests score the same text.
            domain = domain_context.rstrip() + _trailing_whitespace(context)
            domain_requests.append(
                Instance(
                    request_type="loglikelihood",
                    doc=doc,
                    arguments=(domain, continuation, *request.arguments[2:]),
                    idx=len(conditional) + request.idx,
                    **instance_kwargs,
                )
            )
        return conditional + domain_requests

    def domain_premise(self, doc: dict, doc_id: int | None = None) -> str:
        """The rendered domain premise for ``doc`` (never empty)."""
        what = f"the domain premise {self.domain_premise_template!r}"
        text = doc_checks.rendered(self, what, self._render_premise, doc, doc_id)
        if not text:
            raise doc_checks.fault(
                self,
                doc,
                doc_id,
                f"the domain premise template {self.domain_premise_template!r} renders empty; "
                "a domain premise must be non-empty.",
            )
        return text

    def _render_premise(self, doc: dict) -> str:
        # as lm_eval.utils.apply_template renders, on the template compiled once
        return self._premise.render(**doc)

    def domain_context(
        self,
        doc: dict,
        *,
        doc_id: int | None = None,
        apply_chat_template: bool = False,
        chat_template: Any = None,
    ) -> str:
        """The domain premise inside the prompt lm-eval would build around a document's
        text: system instruction, description, chat template and gen_prefix, no examples."""
        premise = self.domain_premise(doc, doc_id)
        with self._domain_premise_as_text(premise):
            context = self.fewshot_context(
                doc,
                num_fewshot=0,
                system_instruction=self._system_instruction,
                apply_chat_template=apply_chat_template,
                chat_template=chat_template,
                gen_prefix=self.doc_to_prefix(doc),
            )
        return context

    @contextlib.contextmanager
    def _domain_premise_as_text(self, premise: str) -> Iterator[None]:
        # fewshot_context renders the document through doc_to_text (and, for several
        # inputs, through the option contexts): stand the domain premise in for both.
        saved = self.multiple_input
        self._rendering_domain, self._domain_text, self.multiple_input = True, premise, 0
        try:
            yield
        finally:
            self._rendering_domain, self.multiple_input = False, saved

    def doc_to_text(self, doc: dict, doc_to_text: Any = None) -> Any:
        if self._rendering_domain and doc_to_text is None:
            return self._domain_text
        return super().doc_to_text(doc, doc_to_text)

    def doc_to_choice(self, doc: Any, doc_to_choice: Any = None) -> list[str]:
        # Building one document's requests asks for its options four times, and lm-eval
        # compiles a Jinja doc_to_choice on every call: keep the last document's.
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
        scored_texts: set[str] = set()  # options and domain contexts, for the token check
        for doc_id, requests in by_doc.items():
            requests.sort(key=lambda r: r.idx)
            doc = requests[0].doc
            self._pending.add(doc, self._document_scoring(doc, doc_id, requests, counter))
            scored_texts.update(r.arguments[1] for r in requests)
            scored_texts.update(r.arguments[0] for r in conditional_and_domain(requests)[1])
        if counter is not None:
            for warning in literal_special_token_warnings(
                scored_texts, counter.tokenizer, self.config.task, self._source
            ):
                log.warning(warning)

    def _document_scoring(
        self, doc: dict, doc_id: int, requests: list[Instance], counter: TokenCounter | None
    ) -> DocumentScoring:
        # The options and target were checked when the task was built; the gold index
        # is needed again here.
        choices = doc_checks.options(self, doc, doc_id)
        gold = doc_checks.gold_index(self, doc, doc_id, choices)
        n_options = len(choices)
        if len(requests) != 2 * n_options:  # the cache check compares them; a safeguard
            raise doc_checks.fault(
                self, doc, doc_id, f"{len(requests)} requests for {n_options} options."
            )
        if counter is None:
            return DocumentScoring(gold, None, float("nan"))
        counts = [counter.split(*request.arguments[:2]) for request in requests]
        doc_checks.check_token_counts(self, doc, doc_id, requests, counts, counter.max_length)
        truncated = sum(n_ctx + n_cont > counter.max_length + 1 for n_ctx, n_cont in counts)
        n_tokens = tuple(n_cont for _n_ctx, n_cont in conditional_and_domain(counts)[0])
        return DocumentScoring(gold, n_tokens, float(truncated))

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

    def override_metric(self, metric_name: str) -> None:
        """lm-eval's ``--predict_only`` calls ``override_metric("bypass")``: from then on the
        task reports lm-eval's own results for the conditional requests alone (for a
        multiple-choice task: none), and the samples still log every request's answer."""
        super().override_metric(metric_name)
        self._metric_override = metric_name

    def process_results(self, doc: dict, results: list[tuple[float, bool]]) -> dict[str, float]:
        scoring = self._pending.pop(doc)
        if scoring is None:
            raise DCPMIConfigError(
                f"task {self.config.task}: results for a document whose requests this task "
                "did not build; build_all_requests must run first."
            )
        conditional_results, _domain_results = conditional_and_domain(results)
        if self._metric_override is not None:
            return super().process_results(doc, conditional_results)
        conditional, domain = conditional_and_domain([ll for ll, _is_greedy in results])
        # The task's own metrics (acc_norm, brier_score, ...) from lm-eval's code, on the
        # conditional requests alone; the plugin's rules override acc and acc_norm with
        # the same values wherever every score is finite.
        own = super().process_results(doc, conditional_results)
        n_chars = [len(choice) for choice in self.doc_to_choice(doc)]
        scores = accuracies(conditional, domain, scoring.gold, scoring.n_tokens, n_chars)
        if scores["unranked"] and not self._warned_unranked:
            self._warned_unranked = True
            log.warning(
                "%s: some documents have no finite score (NaN or -inf) for any option under "
                "some method (first: %s); that method counts them as wrong, never as a pick of "
                "option 0. Their number is the task's `unranked` metric.",
                self.config.task,
                doc.get("source", "a document") if isinstance(doc, dict) else "a document",
            )
        return {**own, **scores, "truncated": scoring.truncated}


__all__ = ["METHODS", "DCPMIConfigError", "DCPMITask", "affix", "dcpmi_metric_list"]
