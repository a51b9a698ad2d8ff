"""The lm-eval glue: a multiple-choice task that also scores each option after a domain premise.

A task YAML opts in with two lines::

    class: !function lm_eval_dcpmi.task.DCPMITask
    domain_premise: " the answer is:"      # a Jinja template over the document

For every option the task sends lm-eval's usual request ``(premise, option)`` and a
second one ``(domain premise, option)``; ``process_results`` turns the two
loglikelihoods (and the option's token count) into the four accuracies of
``scoring.accuracies``.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from lm_eval import utils as lm_utils
from lm_eval.api.instance import Instance
from lm_eval.api.metrics import mean
from lm_eval.api.task import ConfigurableTask

from lm_eval_dcpmi.errors import DCPMIConfigError
from lm_eval_dcpmi.scoring import ACCURACIES, COUNTS, accuracies
from lm_eval_dcpmi.tokens import TokenCounter, literal_special_tokens, token_counter_for

log = logging.getLogger(__name__)


def affix(value: str, before: str = "", after: str = "") -> str:
    """Jinja filter: ``options | map('affix', ' "', '"') | list`` wraps every option."""
    return f"{before}{value}{after}"


# lm-eval renders every template with this one Jinja environment (it registers
# its own `regex_replace` filter the same way).
lm_utils.env.filters.setdefault("affix", affix)


def total(items: list[float]) -> float:
    """Aggregation for counts (requests truncated): their sum."""
    return float(sum(items))


class DCPMITask(ConfigurableTask):
    """``ConfigurableTask`` for multiple choice, plus domain-premise requests and four metrics."""

    def __init__(self, config: dict[str, Any] | None = None, **kwargs: Any) -> None:
        config = dict(config or {})
        config.pop("class", None)
        name = config.get("task", "<unnamed task>")
        self.domain_premise_template = config.pop("domain_premise", None)
        source = (config.get("metadata") or {}).get("config_source", "its YAML")
        if not isinstance(self.domain_premise_template, str):
            raise DCPMIConfigError(
                f"task {name} ({source}): DC-PMI needs a domain premise; add a line such as "
                f'`domain_premise: " the answer is:"` (a string or a Jinja template over '
                "the document)."
            )
        if config.get("output_type") != "multiple_choice":
            raise DCPMIConfigError(
                f"task {name} ({source}): DC-PMI scores options, so it needs "
                f"`output_type: multiple_choice`, not {config.get('output_type')!r}."
            )
        # Record the domain premise with the task's config, so results files show it.
        config["metadata"] = {
            **(config.get("metadata") or {}),
            "domain_premise": self.domain_premise_template,
        }
        super().__init__(config=config, **kwargs)
        if self.multiple_input:
            raise DCPMIConfigError(
                f"task {name}: doc_to_text returns an option index (several premises, one "
                "continuation, as in Winogrande); DC-PMI needs one premise and several options."
            )
        self._metric_fn_list = {metric: None for metric in (*ACCURACIES, *COUNTS)}
        self._aggregation_list = {metric: mean for metric in ACCURACIES} | dict.fromkeys(
            COUNTS, total
        )
        self._higher_is_better = {metric: True for metric in ACCURACIES} | dict.fromkeys(
            COUNTS, False
        )
        # (context, continuation) pairs of each document's requests, for token counts.
        self._request_texts: dict[str, list[tuple[str, str]]] = {}
        self._warned_no_tokenizer = False
        self._special_tokens_checked = False

    # lm-eval's download() warns on every custom_dataset; ours are the plugin's loaders.
    def download(self, dataset_kwargs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        if callable(self.config.custom_dataset):
            self.dataset = self.config.custom_dataset(
                **(self.config.metadata or {}), **(dataset_kwargs or {})
            )
        else:
            super().download(dataset_kwargs, **kwargs)

    def domain_premise(self, doc: dict) -> str:
        """The rendered domain premise for ``doc``."""
        text = lm_utils.apply_template(self.domain_premise_template, doc)
        if not text:
            raise DCPMIConfigError(
                f"task {self.config.task}: the domain premise template "
                f"{self.domain_premise_template!r} renders empty for document "
                f"{doc.get('source', '')}; a domain premise must be non-empty."
            )
        return text

    def construct_requests(self, doc: dict, ctx: Any, **kwargs: Any) -> list[Instance]:
        conditional = super().construct_requests(doc, ctx, **kwargs)
        instance_kwargs = {
            k: v for k, v in kwargs.items() if k not in ("apply_chat_template", "chat_template")
        }
        domain = self.domain_premise(doc)
        # Same continuation string as the conditional request (delimiter included), so
        # the two loglikelihoods score exactly the same text.
        domain_requests = [
            Instance(
                request_type="loglikelihood",
                doc=doc,
                arguments=(domain, request.arguments[1]),
                idx=len(conditional) + i,
                **instance_kwargs,
            )
            for i, request in enumerate(conditional)
        ]
        requests = conditional + domain_requests
        self._request_texts[_doc_key(doc)] = [r.arguments[:2] for r in requests]
        return requests

    def process_results(self, doc: dict, results: list[tuple[float, bool]]) -> dict[str, float]:
        loglikelihoods = [ll for ll, _is_greedy in results]
        n_options = len(loglikelihoods) // 2
        conditional, domain = loglikelihoods[:n_options], loglikelihoods[n_options:]
        texts = self._request_texts.get(_doc_key(doc))
        counter = self._token_counter()
        if counter is None or texts is None:
            if texts is None and counter is not None:
                log.warning(
                    "%s: requests were not built in this run (cached?); acc_avg is NaN",
                    self.config.task,
                )
            n_tokens, truncated = None, float("nan")
        else:
            counts = [counter.split(ctx, cont) for ctx, cont in texts]
            n_tokens = [n_cont for _n_ctx, n_cont in counts[:n_options]]
            truncated = float(
                sum(n_ctx + n_cont > counter.max_length + 1 for n_ctx, n_cont in counts)
            )
        gold = self._gold_index(doc)
        n_chars = [len(choice) for choice in self.doc_to_choice(doc)]
        return {**accuracies(conditional, domain, gold, n_tokens, n_chars), "truncated": truncated}

    def _gold_index(self, doc: dict) -> int:
        gold = self.doc_to_target(doc)
        choices = self.doc_to_choice(doc)
        if isinstance(gold, str):
            if gold not in choices:
                raise DCPMIConfigError(
                    f"task {self.config.task}: target {gold!r} is not among the options {choices} "
                    f"of document {doc.get('source', '')}."
                )
            gold = choices.index(gold)
        if not isinstance(gold, int) or not 0 <= gold < len(choices):
            raise DCPMIConfigError(
                f"task {self.config.task}: target {gold!r} of document {doc.get('source', '')} is "
                f"not an option index in 0..{len(choices) - 1}; doc_to_target must give one index."
            )
        return gold

    def _token_counter(self) -> TokenCounter | None:
        metadata = self.config.metadata or {}
        counter = token_counter_for(
            tokenizer=_str_or_none(metadata.get("tokenizer")),
            pretrained=_str_or_none(metadata.get("pretrained")),
            gguf_file=_str_or_none(metadata.get("gguf_file")),
            revision=_str_or_none(metadata.get("revision")),
            add_bos_token=metadata.get("add_bos_token"),
            max_length=metadata.get("max_length"),
        )
        if counter is None and not self._warned_no_tokenizer:
            self._warned_no_tokenizer = True
            log.warning(
                "%s: acc_avg needs the model's tokenizer and none is known (no `pretrained` or "
                "`tokenizer` in the model args or --metadata); acc_avg and truncated are NaN.",
                self.config.task,
            )
        if counter is not None and not self._special_tokens_checked:
            self._special_tokens_checked = True
            self._warn_literal_special_tokens(counter.tokenizer)
        return counter

    # ---- options that name a special token, e.g. SST-5's '<|endoftext|>' -------------

    def _warn_literal_special_tokens(self, tokenizer: Any) -> None:
        """Warn once per task when an option or domain premise names a special token
        (``<|endoftext|>``, ``</s>``, ...) that this tokenizer does not have: the model
        then scores the literal characters, not the token the task's author meant."""
        texts: set[str] = set()
        for pairs in self._request_texts.values():
            texts.update(continuation for _context, continuation in pairs)
            texts.update(context for context, _continuation in pairs[len(pairs) // 2 :])
        for literal, n_tokens in literal_special_tokens(texts, tokenizer).items():
            eos = getattr(tokenizer, "eos_token", None)
            log.warning(
                "%s: the options or domain premise contain %r, which the tokenizer %s does not "
                "have as one special token; the model scores these %d characters as ordinary "
                "text (%d tokens), not as a special token.%s To score another token, copy the "
                "task's YAML (%s), replace %r there and pass its folder with --include_path.",
                self.config.task,
                literal,
                getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__,
                len(literal),
                n_tokens,
                f" This tokenizer's end-of-sequence token is {eos!r}." if eos else "",
                (self.config.metadata or {}).get("config_source", "its YAML file"),
                literal,
            )


def _doc_key(doc: dict) -> str:
    return json.dumps(doc, sort_keys=True, default=str)


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None
