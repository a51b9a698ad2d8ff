"""The one ``+premise.<digest>`` rule: a DC-PMI task's version names what it scores
against (lm-eval's ``task_hashes`` see the conditional requests only).

The digest is the first 8 hex digits of a sha256: of the domain premise alone for a task
with nothing else, else of every reference context and content-free field
(``_references.identity_sha256``). Results record the whole sha256 as the task metadata's
``premise_sha256``. A domain premise derived from each document's premise (none written)
is recorded by its rule, ``DERIVED_KEY``, and shown as ``derived_label`` says. Imports
nothing of lm-eval: the report and the leaderboard read it.
"""

from __future__ import annotations

import hashlib
from typing import Any

MARK = "+premise."
# Task metadata key: the rule that derived each document's domain premise (then
# `domain_premise` is null); absent when the premise was written.
DERIVED_KEY = "domain_premise_derived"
# How reports, verify and exports name DC-PMI under a derived premise, by rule.
DERIVED_NAMES = {"last_word": "last-word premise"}


def text_sha256(text: str) -> str:
    """The sha256 (hex) of ``text`` in UTF-8: of a domain premise, ``premise_sha256``."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def short_digest(sha256: str) -> str:
    """What a version names of a sha256: its first 8 hex digits."""
    return sha256[:8]


def premise_versioned(version: Any, sha256: str) -> str:
    """The version results record: the YAML's number and ``short_digest(sha256)``."""
    return f"{version}{MARK}{short_digest(sha256)}"


def premise_digest_in(version: Any) -> str:
    """The 8 hex digits a recorded version names ('' for a version without them)."""
    return str(version or "").partition(MARK)[2]


def premise_version(version: Any, domain_premise: str) -> str:
    """The version results record for a task with the domain premise alone: the YAML's
    number and the premise's digest (lm-eval's ``task_hashes`` see the conditional
    requests only). A task with more reference contexts or content-free fields hashes
    them all (``references.identity``)."""
    return premise_versioned(version, text_sha256(domain_premise))


def derived_rule(metadata: Any) -> str | None:
    """The rule a task's recorded metadata names for its derived domain premise; None for
    a written premise."""
    rule = metadata.get(DERIVED_KEY) if isinstance(metadata, dict) else None
    return None if rule is None else str(rule)


def derived_label(rule: str) -> str:
    """``'DC-PMI (last-word premise)'``: DC-PMI under the domain premise ``rule`` derives."""
    return f"DC-PMI ({DERIVED_NAMES.get(rule, f'domain premise derived by {rule!r}')})"
