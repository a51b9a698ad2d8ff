"""What a DC-PMI task keeps per document between building its requests and scoring them."""

from __future__ import annotations

import json
from dataclasses import dataclass

from lm_eval.api.instance import Instance


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
