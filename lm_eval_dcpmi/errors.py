"""The plugin's errors: each one is a message for the user, not a bug report.

``dcpmi run`` prints any ``DCPMIError`` as one line and exits with status 2; under plain
``lm_eval`` the autoload hook prints it without a traceback (see ``_autoload``).
"""

from __future__ import annotations

__all__ = [
    "DCPMIConfigError",
    "DCPMIError",
    "DataError",
    "cause_of",
    "install_excepthook",
    "offline_errors",
    "offline_fix",
    "one_line",
    "printable",
]


class DCPMIError(ValueError):
    """Bad input (data file, task config, option): the message names it and how to fix it."""


class DCPMIConfigError(DCPMIError):
    """A task YAML that cannot be scored with DC-PMI; the message says how to fix it."""


class DataError(DCPMIError):
    """A data file is missing or holds a record the task cannot score."""


TRACEBACK_ENV = "LM_EVAL_DCPMI_TRACEBACK"


def offline_fix() -> str:
    """How to get a Hub dataset that is neither cached nor reachable."""
    import os

    offline = [
        name for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE") if os.environ.get(name) == "1"
    ]
    mode = f" ({'=1, '.join(offline)}=1: offline mode)" if offline else ""
    return (
        f"It is not in the local Hugging Face datasets cache and cannot be downloaded{mode}. "
        "Download it once with network access (it then stays in the cache, where offline "
        "mode finds it), or point the task at a local copy (dataset_path and "
        "dataset_kwargs: data_files in its YAML)."
    )


def offline_errors() -> tuple[type[BaseException], ...]:
    """What ``datasets.load_dataset`` raises for a Hub dataset it can neither download nor
    find in its cache (offline, or no network)."""
    kinds: list[type[BaseException]] = [ConnectionError, TimeoutError]
    try:
        import requests

        kinds += [requests.ConnectionError, requests.Timeout]
    except ImportError:  # pragma: no cover - a dependency of datasets
        pass
    try:
        from huggingface_hub import errors as hub_errors

        kinds += [
            getattr(hub_errors, name)
            for name in ("OfflineModeIsEnabled", "LocalEntryNotFoundError")
            if hasattr(hub_errors, name)
        ]
    except ImportError:  # pragma: no cover
        pass
    return tuple(kinds)


def one_line(message: str) -> str:
    """``message`` on one line: its lines joined by a space, each line's text kept as it
    is (runs of spaces too: the strings a message shows are ``repr``s, whose spaces count).

    >>> one_line("the premise '   ' is blank:\\n  fix it")
    "the premise '   ' is blank: fix it"
    """
    return " ".join(line.strip() for line in str(message).splitlines() if line.strip())


def printable(message: str) -> str:
    """``message`` as one printable line: a control character that a name read from a file
    brings (a line break, a NUL) is shown as its escape (``\\n``, ``\\x00``), and so is a
    lone surrogate (``\\ud800``), which no terminal encoding holds.

    >>> printable("task 'a\\nb' is not installed")
    "task 'a\\\\nb' is not installed"
    """
    shown = "".join(
        repr(c)[1:-1] if c != "\t" and (ord(c) < 32 or 127 <= ord(c) < 160) else c
        for c in str(message)
    )
    return shown.encode("utf-8", "backslashreplace").decode("utf-8")


def cause_of(
    error: BaseException, kinds: type[BaseException] | tuple[type[BaseException], ...]
) -> BaseException | None:
    """The first of ``error`` and the exceptions it was raised from (``__cause__``, else
    ``__context__``) that is one of ``kinds``; None if none is."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, kinds):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def install_excepthook() -> None:
    """Make an uncaught ``DCPMIError`` end the program with its message alone.

    Under plain ``lm_eval`` a bad data file or task config would otherwise end in a
    40-80-line traceback with the message on its last line. Other exceptions keep
    Python's hook; ``LM_EVAL_DCPMI_TRACEBACK=1`` keeps the traceback for ours too.
    """
    import os
    import sys

    previous = sys.excepthook
    if getattr(previous, "_dcpmi", False):
        return

    def excepthook(kind, value, traceback):  # type: ignore[no-untyped-def]
        if isinstance(value, DCPMIError) and os.environ.get(TRACEBACK_ENV, "0") == "0":
            print(
                f"\nlm-eval-dcpmi: error: {one_line(str(value))}\n"
                f"(set {TRACEBACK_ENV}=1 for the traceback)",
                file=sys.stderr,
            )
            return
        previous(kind, value, traceback)

    excepthook._dcpmi = True  # type: ignore[attr-defined]
    sys.excepthook = excepthook
