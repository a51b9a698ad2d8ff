"""What a DC-PMI task keeps per document between building its requests and scoring them,
and the per-process facts it warns about once."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass

from lm_eval.api.instance import Instance

from lm_eval_dcpmi.harness.configurable_task import loglikelihood_answer
from lm_eval_dcpmi.rules.layout import Layout

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DocumentScoring:
    """What ``process_results`` needs of a document beyond its loglikelihoods."""

    gold: int
    n_options: int
    carrier: bool  # holds the content-free requests
    n_tokens: tuple[int, ...] | None  # per option, in the conditional request
    truncated: float  # requests cut from the left; NaN without tokenizer
    conditional: tuple[Instance, ...] = ()  # the conditional requests, in option order


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


_WARNED_WORLD: list[bool] = []


def warn_if_every_process_scores_everything(world_size: int) -> None:
    """lm-eval's `hf` shards documents only across several GPUs: under `torchrun` or
    `accelerate launch` on the CPU (or one GPU) every process is rank 0 of 1 and scores the
    whole run. Said once per process."""
    launched = os.environ.get("WORLD_SIZE", "1")
    if launched.isdigit() and int(launched) > 1 and world_size == 1 and not _WARNED_WORLD:
        _WARNED_WORLD.append(True)
        log.warning(
            "%s processes were started (WORLD_SIZE=%s) but the model reports a world size "
            "of 1: lm-eval's hf splits documents only across several GPUs, so every process "
            "will score the whole run. Start one process (see docs/harness.md, several GPUs).",
            launched,
            launched,
        )


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
