"""StoryCloze premise (the spec's string), for dcpmi_storycloze.yaml."""

from __future__ import annotations

SENTENCES = ("InputSentence1", "InputSentence2", "InputSentence3", "InputSentence4")


def storycloze_premise(doc: dict) -> str:
    """The four story sentences joined by spaces (no leading space), with a final ``'.'``
    added unless the story already ends in ``'.'`` or ``'!'`` (``'?'`` gets one too)."""
    story = " ".join(doc[field] for field in SENTENCES)
    return story if story.endswith((".", "!")) else story + "."
