"""What a DC-PMI task keeps per document between building its requests and scoring them."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from lm_eval.api.instance import Instance


def document_key(doc: dict) -> str:
    """A document by its content (lm-eval hands some hooks the document, not its id)."""
    return json.dumps(doc, sort_keys=True, default=str)


class RenderedPremises:
    """Each document's reference-context premises as the checks at task build rendered
    them, by the document's content (a digest of it): the requests use these very
    strings, so every premise is rendered once."""

    def __init__(self) -> None:
        self._by_doc: dict[bytes, dict[str, str]] = {}

    @staticmethod
    def _key(doc: dict) -> bytes:
        return hashlib.sha256(document_key(doc).encode("utf-8")).digest()

    def add(self, doc: dict, texts: dict[str, str]) -> None:
        self._by_doc[self._key(doc)] = texts

    def get(self, doc: dict, reference: str) -> str | None:
        return self._by_doc.get(self._key(doc), {}).get(reference)

    def __len__(self) -> int:
        return len(self._by_doc)


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
        return document_key(doc)

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
