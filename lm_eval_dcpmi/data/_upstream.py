"""The upstream files: where a download goes (the address a dataset folder's ``FILES`` names,
or the same path on a mirror) and what it must bring (the sha256 ``FILES`` records).

``DCPMI_DATA_MIRROR`` (``http[s]://host[:port][/prefix]``) sends every download to another
server: its scheme and host replace the upstream address's, and the upstream path follows
its own (``https://ai2-public-datasets.s3.amazonaws.com/arc/ARC-V1-Feb2018.zip`` becomes
``http://127.0.0.1:8000/arc/ARC-V1-Feb2018.zip``): a server that holds the upstream hosts'
files at their paths (a copy inside a network without access to them; the tests' server).
It is parsed where a download starts (``mirror_from_env``) and any value but an http or
https address stops there, in one line naming it.

A download whose sha256 is neither the recorded one nor that of a known copy
(``KnownCopy``: HellaSwag's rebuilt file) stops with the file, both digests and the fix.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import SplitResult, urlsplit, urlunsplit

from lm_eval_dcpmi.data import _folders as folders
from lm_eval_dcpmi.data._digests import sha256_of
from lm_eval_dcpmi.errors import DataError

MIRROR_ENV = "DCPMI_DATA_MIRROR"
UPSTREAM_FILE = "the upstream file"


@dataclass(frozen=True)
class Mirror:
    """A server that stands in for the upstream hosts (``DCPMI_DATA_MIRROR``)."""

    scheme: str
    netloc: str  # host[:port]
    prefix: str  # a path in front of every upstream path: "" or "/a/b"

    def address(self, url: str) -> str:
        """``url`` (an upstream address) on this server: its path (and query) kept."""
        parts = urlsplit(url)
        return urlunsplit((self.scheme, self.netloc, self.prefix + parts.path, parts.query, ""))


def parse_mirror(value: str) -> Mirror:
    """``DCPMI_DATA_MIRROR``'s value as a ``Mirror``; a ``DataError`` for anything but an
    http or https address of a host (a path prefix allowed; no query or fragment)."""
    parts = urlsplit(value.strip())
    problem = _mirror_problem(parts)
    if problem:
        raise DataError(
            f"{MIRROR_ENV}={value!r} {problem}. Set it to the http(s) address of a server "
            "that holds the upstream files at their upstream paths (e.g. "
            f"{MIRROR_ENV}=http://127.0.0.1:8000), or unset it to download from the "
            "upstream addresses."
        )
    return Mirror(parts.scheme, parts.netloc, parts.path.rstrip("/"))


def _mirror_problem(parts: SplitResult) -> str | None:
    if parts.scheme not in ("http", "https"):
        return "is not an http:// or https:// address"
    if not parts.hostname:
        return "names no host"
    try:
        _ = parts.port  # urlsplit checks the port only when asked for it
    except ValueError:
        return "has a port that is not a number from 0 to 65535"
    if parts.query or parts.fragment:
        return "has a query or fragment (#...), which no download address keeps"
    return None


def mirror_from_env(environ: Mapping[str, str] | None = None) -> Mirror | None:
    """The mirror ``DCPMI_DATA_MIRROR`` names (``environ``: default ``os.environ``); None
    when it is unset or empty."""
    value = (os.environ if environ is None else environ).get(MIRROR_ENV, "")
    return parse_mirror(value) if value.strip() else None


def known_as(file: str, digest: str) -> str | None:
    """What the copy of ``file`` whose sha256 is ``digest`` is: ``UPSTREAM_FILE``, a known
    copy's name (``KnownCopy.what``), or None (neither, or nothing recorded)."""
    source = folders.upstream(file)
    if source is None or source.sha256 is None:
        return None
    if digest == source.sha256:
        return UPSTREAM_FILE
    return next((copy.what for copy in source.copies if copy.sha256 == digest), None)


def checked_sha256(file: str, path: Path, address: str, *cached: Path) -> str:
    """The sha256 of ``path``, ``file`` as downloaded from ``address``; a ``DataError`` when
    its dataset folder records another (``cached``: the download manager's copies, which
    the fix removes). Unchecked when no digest is recorded."""
    digest = sha256_of(path)
    source = folders.upstream(file)
    if source is None or source.sha256 is None or known_as(file, digest) is not None:
        return digest
    expected = source.sha256
    copies = [f"{copy.sha256} ({copy.what})" for copy in source.copies]
    also = f" (or {', '.join(copies)})" if copies else ""
    remove = " ".join(str(p) for p in dict.fromkeys(cached)) or str(path)
    raise DataError(
        f"{file}: downloaded from {address}, its sha256 is {digest}, but task_configs/"
        f"{file.split('/', 1)[0]}/dataset.py records {expected}{also}: the server sent "
        f"other bytes than the upstream file. Check what {address} serves (and "
        f"{MIRROR_ENV}, if set), remove the cached download (rm -r {remove}) and try again, "
        "or set DCPMI_DATA_DIR to a folder that holds the right file."
    )
