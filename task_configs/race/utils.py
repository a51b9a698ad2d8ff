"""RACE premise and options (the spec's strings), for the dcpmi_race_* YAMLs."""

from __future__ import annotations


def race_premise(doc: dict) -> str:
    """``' <article>\\n <text before the blank>'`` for a cloze question, otherwise
    ``' <article>\\n question: <question> \\n answer:'`` (with the space before the
    newline). The article is stripped of surrounding whitespace."""
    article = doc["article"].strip()
    if doc["is_cloze"]:
        return f" {article}\n {doc['before_blank']}"
    return f" {article}\n question: {doc['question']} \n answer:"


def race_options(doc: dict) -> list[str]:
    """Each option after two spaces; a cloze option is followed by the text after the
    blank (``'  <option> <after blank>'``)."""
    after_blank = " " + doc["after_blank"] if doc["is_cloze"] else ""
    return [f"  {option}{after_blank}" for option in doc["options"]]
