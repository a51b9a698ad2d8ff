"""BoolQ premise (the spec's string), for dcpmi_boolq.yaml."""

from __future__ import annotations


def boolq_premise(doc: dict) -> str:
    """``' title: <title>\\n question: <Question>?\\n answer:'``. The passage is not used.
    The question's first letter is capitalised, then every ``' i '`` becomes ``' I '``."""
    question = doc["question"][:1].upper() + doc["question"][1:]  # "" for a content-free input
    question = question.replace(" i ", " I ")
    return f" title: {doc['title']}\n question: {question}?\n answer:"
