"""What a submission's samples log, against what its data give (``_rebuild``).

Each function compares one thing and returns findings naming the file, task, document and
what differs: the document ids (``document_ids``), the data files' digests
(``data_findings``), the premise and version recorded (``premise_findings``,
``version_findings``), the recorded counts and
the range the run covered (``split_findings``), each document's requests, target, hashes
and answers (``document_findings``), and lm-eval's ``task_hashes`` (``hash_findings``).
Each kind of difference is shown for the first ``SHOWN`` documents, then counted.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from lm_eval_dcpmi.errors import DCPMIError
from lm_eval_dcpmi.report import HASH_FIELDS, request_pairs, task_hash
from lm_eval_dcpmi.task import DERIVED_KEY, derived_label, derived_rule
from lm_eval_dcpmi.verification._rebuild import RebuiltTask
from lm_eval_dcpmi.verification._recompute import Finding, logged_number
from lm_eval_dcpmi.verification._submission import Submission, TaskEntry

# Beyond this many documents with the same kind of difference, one line counts the rest.
SHOWN = 5


def is_index(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def document_ids(samples: Sequence[dict[str, Any]], where: str) -> tuple[list[int], list[Finding]]:
    """The logged documents' indices (those that are indices); findings for one that is not
    a whole number 0 or more, or logged twice."""
    ids, seen, findings = [], set(), []
    for line, sample in enumerate(samples, start=1):
        value = sample.get("doc_id")
        if not is_index(value):
            findings.append(
                Finding(where, f"sample {line}: doc_id {value!r} is not a document index")
            )
            continue
        if value in seen:
            findings.append(Finding(where, f"doc {value} is logged twice"))
        seen.add(value)
        ids.append(value)
    return ids, first_few(findings)


def data_findings(task: TaskEntry, rebuilt: RebuiltTask, where: str) -> list[Finding]:
    """The data digests the run recorded against those of the files the task read here."""
    recorded = task.data_files
    if rebuilt.data_files and not recorded:
        return [
            Finding(
                where,
                "records no data digests"
                + (" (an empty data_files map)" if recorded == {} else "")
                + f", but the task reads {', '.join(sorted(rebuilt.data_files))}; rerun it to "
                "record them",
            )
        ]
    found = []
    for file, digest in sorted(rebuilt.data_files.items()):
        if (recorded or {}).get(file) != digest:
            logged = (recorded or {}).get(file)
            found.append(
                Finding(
                    where,
                    other_data(file, digest, logged)
                    if logged
                    else f"data file {file}: the file here has sha256 {digest[:16]}..., but the "
                    "run recorded no digest of it",
                )
            )
    for file in sorted(set(recorded or {}) - set(rebuilt.data_files)):
        found.append(Finding(where, f"records data file {file}, which the task here does not read"))
    return found


def other_data(file: str, here: str, recorded: str) -> str:
    """A data file whose sha256 here is not the one the run recorded; when the run read a
    known copy of the file (HellaSwag's rebuilt file, which the committed results read),
    one more sentence says so, and what the file here is."""
    from lm_eval_dcpmi.data import UPSTREAM_FILE, known_as

    said = (
        f"data file {file}: the file here has sha256 {here[:16]}..., but the run read "
        f"{recorded[:16]}...: other data"
    )
    read = known_as(file, recorded)
    if read is None or read == UPSTREAM_FILE:
        return said
    have = "the upstream file" if known_as(file, here) == UPSTREAM_FILE else "the file"
    return f"{said}. The run read {read}, sha256 {recorded[:16]}..., not {have} you have."


# What a task scored against, as its metadata records it: the domain premise (null when
# derived) and the rule that derived it, the digest, the other reference contexts and CC's
# fields. The first two are always recorded; the others are compared where recorded.
PREMISE_RECORD = ("domain_premise", DERIVED_KEY)
PREMISE_EXTRAS = ("premise_sha256", "reference_contexts", "content_free_fields")


def premise_findings(task: TaskEntry, rebuilt: RebuiltTask, where: str) -> list[Finding]:
    """What the results record that the task scored against (``PREMISE_RECORD``, and
    ``PREMISE_EXTRAS`` where recorded) against the task built here: a written premise
    recorded as derived, or the other way round, is another task's record."""
    here = rebuilt.task.config.metadata or {}
    found = []
    for key in PREMISE_RECORD + tuple(k for k in PREMISE_EXTRAS if k in task.metadata):
        recorded, built = task.metadata.get(key), here.get(key)
        if recorded != built:
            found.append(
                Finding(
                    where,
                    f"records {key} {recorded!r}, but the task built here has {built!r}"
                    + _premise_shown(here),
                )
            )
    return found


def version_findings(task: TaskEntry, rebuilt: RebuiltTask, where: str) -> list[Finding]:
    """The task's version as the results record it (its ``versions`` entry) against the
    task built here: a DC-PMI task's version holds its premise's digest
    (``1+premise.<sha256[:8]>``), so any other is another task's record, whether or not
    such a task is installed."""
    built = getattr(rebuilt.task, "VERSION", None)  # DCPMITask: with its premise's digest
    if built is None:
        return []
    if task.version is not None and task.version == str(built):
        return []
    return [
        Finding(
            where,
            f"its versions entry records version {task.version!r}, but the task built here "
            f"is version {str(built)!r}" + _premise_shown(rebuilt.task.config.metadata or {}),
        )
    ]


def _premise_shown(metadata: dict[str, Any]) -> str:
    rule = derived_rule(metadata)
    return "" if rule is None else f" ({derived_label(rule)})"


def _expected_ids(submission: Submission, documents: int) -> tuple[list[int], str] | None:
    """The documents the run was asked to score, where its results file says: a shard, a
    ``--limit`` prefix, else (a whole run) every one; None for a ``--samples`` selection."""
    from lm_eval_dcpmi.task import Shard, prefix_size

    block = submission.data.get("dcpmi") if isinstance(submission.data.get("dcpmi"), dict) else {}
    shard = block.get("shard")
    if isinstance(shard, dict):
        try:
            one = Shard(int(shard["index"]), int(shard["count"]))
        except (KeyError, TypeError, ValueError):
            return None
        return one.indices(documents), f"shard {one}"
    limit = logged_number(submission.limit)
    if math.isfinite(limit) and limit > 0:
        return list(range(prefix_size(documents, limit))), f"the --limit {submission.limit} prefix"
    return None


def split_findings(
    submission: Submission, task: TaskEntry, rebuilt: RebuiltTask, ids: list[int], where: str
) -> list[Finding]:
    """The recorded counts against the split built from the data and the logged documents."""
    found = []
    if task.n_total is not None and task.n_total != rebuilt.documents:
        found.append(
            Finding(
                where,
                f"records a split of {task.n_total} documents (n-samples original), but the "
                f"split built from the data has {rebuilt.documents}",
            )
        )
    if task.n is not None and task.n != len(ids):
        found.append(
            Finding(
                where,
                f"records {task.n} documents scored (n-samples effective), but its samples log "
                f"{len(ids)}",
            )
        )
    try:
        expected = _expected_ids(submission, rebuilt.documents)
    except DCPMIError as error:  # a recorded shard that is no K/N (Shard refuses it)
        shown = str(error).rstrip(".")
        return [*found, Finding(where, f"its dcpmi.shard: {shown}; no run writes it")]
    if expected is None and task.n is not None and task.n == task.n_total:
        expected = list(range(rebuilt.documents)), "the whole split"
    if expected is not None and sorted(ids) != expected[0]:
        wanted, what = expected
        missing = sorted(set(wanted) - set(ids))
        extra = sorted(set(ids) - set(wanted))
        found.append(
            Finding(
                where,
                f"the samples log {len(ids)} documents, but {what} is {len(wanted)}"
                + (f"; missing {_few(missing)}" if missing else "")
                + (f"; not in it {_few(extra)}" if extra else ""),
            )
        )
    return found


def _few(ids: Sequence[int]) -> str:
    shown = ", ".join(map(str, ids[:3]))
    return f"doc {shown}" + (f" and {len(ids) - 3} more" if len(ids) > 3 else "")


def _short(text: str, most: int = 60) -> str:
    return repr(text if len(text) <= most else text[: most - 3] + "...")


def _request_difference(logged: list[tuple[str, str]], built: list[tuple[str, str]]) -> str | None:
    if len(logged) != len(built):
        return f"logs {len(logged)} requests, but the task built from the data makes {len(built)}"
    for index, (one, other) in enumerate(zip(logged, built, strict=True)):
        for part, a, b in (("context", one[0], other[0]), ("continuation", one[1], other[1])):
            if a != b:
                return (
                    f"request {index}'s {part} is {_short(a)}, but the task built from the data "
                    f"gives {_short(b)}"
                )
    return None


def _response_pair(value: Any) -> list[str]:
    """An answer (loglikelihood, is greedy) as text: JSONL logs its numbers as strings.
    The first repeat's, however deep it is wrapped (lm-eval 0.4 logs ``resps`` as
    ``[[ll, greedy]]`` and ``filtered_resps`` as ``[ll, greedy]``; 0.5.0.dev1 both as
    ``[[ll, greedy]]``)."""
    while isinstance(value, (list, tuple)) and value and isinstance(value[0], (list, tuple)):
        value = value[0]
    return [str(item) for item in value] if isinstance(value, (list, tuple)) else [str(value)]


def document_findings(
    samples: Sequence[dict[str, Any]], rebuilt: RebuiltTask, where: str
) -> list[Finding]:
    """Each logged document against the one built from the data (see the module's
    docstring); each kind of difference shown for the first ``SHOWN`` documents."""
    from lm_eval_dcpmi._harness import doc_hash

    kinds: dict[str, list[Finding]] = {}

    def add(kind: str, doc_id: int, what: str) -> None:
        kinds.setdefault(kind, []).append(Finding(where, f"doc {doc_id}: {what}"))

    for sample in samples:
        doc_id = int(sample["doc_id"])
        built = rebuilt.by_id[doc_id]
        if sample.get("arguments"):
            difference = _request_difference(request_pairs(sample["arguments"]), built.arguments)
            if difference:
                add("requests", doc_id, difference)
        elif len(sample["filtered_resps"]) != len(built.arguments):
            add(
                "requests",
                doc_id,
                f"logs {len(sample['filtered_resps'])} loglikelihoods, but the task built from "
                f"the data makes {len(built.arguments)} requests",
            )
        if str(sample.get("target")) != str(built.target):
            add(
                "target",
                doc_id,
                f"logs target {sample.get('target')!r}, but the data give {built.target!r}",
            )
        hashes = built.hashes
        for name in HASH_FIELDS:
            if isinstance(sample.get(name), str) and sample[name] != hashes[name]:
                add(name, doc_id, f"its {name} is not that of what the data give")
        if "doc" in sample and isinstance(sample.get("doc_hash"), str):
            if doc_hash(sample["doc"]) != sample["doc_hash"]:
                add("doc", doc_id, "its logged doc does not hash to its doc_hash (edited)")
        resps = sample.get("resps")
        if isinstance(resps, list):
            filtered = sample["filtered_resps"]
            for index, (raw, kept) in enumerate(zip(resps, filtered, strict=False)):
                # resps: each repeat's answer (one); filtered_resps: the answer kept
                if _response_pair(raw) != _response_pair(kept):
                    add(
                        "resps",
                        doc_id,
                        f"request {index}'s filtered_resps {kept!r} differ from its resps "
                        f"{raw!r} (lm-eval's multiple choice filters nothing)",
                    )
                    break
            if len(resps) != len(filtered):
                add("resps", doc_id, f"{len(resps)} resps for {len(filtered)} filtered_resps")
    found = []
    for items in kinds.values():
        found += first_few(items)
    return found


def first_few(findings: list[Finding]) -> list[Finding]:
    """The first ``SHOWN`` findings, and one that counts the rest."""
    if len(findings) <= SHOWN:
        return findings
    rest = len(findings) - SHOWN
    return [*findings[:SHOWN], Finding(findings[SHOWN].where, f"and {rest} more like these")]


def hash_findings(
    submission: Submission,
    task: TaskEntry,
    samples: Sequence[dict[str, Any]],
    rebuilt: RebuiltTask,
    where: str,
) -> list[Finding]:
    """lm-eval's ``task_hashes`` against the hashes of what the data give, in the samples'
    order (and against the samples' own, where they log them)."""
    recorded = submission.task_hashes.get(task.name)
    if not recorded:
        return []
    built = [rebuilt.by_id[int(s["doc_id"])].hashes for s in samples]
    found = []
    if task_hash(built) != recorded:
        found.append(
            Finding(
                where,
                "lm-eval's task_hashes in the results file is not the hash of the documents, "
                "prompts and targets built from the data",
            )
        )
    own = task_hash(samples)
    if own is not None and own != recorded:
        found.append(
            Finding(
                where,
                "lm-eval's task_hashes in the results file do not match the samples' hashes: "
                "the samples are another run's (or edited)",
            )
        )
    return found


def recorded_digest_findings(task: TaskEntry, data_dir: str | None, where: str) -> list[Finding]:
    """The recorded data digests against the files of the data folder, without building
    the task (when it cannot be built, a changed file is still named as such; a file not
    in the folder, e.g. one of a task of the user's own, is not compared: the build's
    failure is the finding)."""
    import os

    from lm_eval_dcpmi.data import locate, sha256_of

    root = data_dir or os.environ.get("DCPMI_DATA_DIR")
    found = []
    for file, digest in sorted((task.data_files or {}).items()):
        parts = PurePosixPath(file).parts
        if not parts or PurePosixPath(file).is_absolute() or ".." in parts or "\\" in file:
            # a name read from the file: never a path out of the data folder
            found.append(
                Finding(
                    where,
                    f"data file {file!r}: not a file of the data folder (an absolute path, or "
                    "one that leads out of it); no run records such a name",
                )
            )
            continue
        if root is None or not (Path(root) / file).exists():
            continue  # nothing here to compare with (and no download for a failed build)
        try:
            path = locate(file, root, folder=None)
        except DCPMIError as error:
            found.append(Finding(where, f"data file {file}: {error}"))
            continue
        here = sha256_of(path)
        if here != digest:
            found.append(Finding(where, other_data(file, here, digest)))
    return found
