"""The content-free scores of contextual calibration (CC): read, once a process's requests
are answered, from the one document that carries the content-free requests (``layout``)."""

from __future__ import annotations

from collections.abc import Sequence

from lm_eval.api.instance import Instance

from lm_eval_dcpmi.harness.configurable_task import loglikelihood_answer
from lm_eval_dcpmi.rules.layout import Layout


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
