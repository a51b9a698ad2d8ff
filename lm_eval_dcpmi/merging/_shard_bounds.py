"""What ``dcpmi merge`` reads from a shard's files, bounded before it is trusted.

A shard's results file records its shard ``K/N`` and each task's split size; a leaderboard
merges files it did not make, so none of these is taken as written:

* ``recorded_shard``: ``K/N`` whole numbers with 1 <= K <= N, as ``--shard`` accepts them;
* ``check_split_sizes``: each task's recorded split size is the size of the task built
  here from the data, and N is at most it (a shard holds at least one document of each
  task: ``--shard`` refuses more shards than documents), before any count is used;
* ``check_documents_once``: no document in two shards' samples;
* ``check_out``: ``--out`` is not inside a shard's folder (the next merge of that shard
  would find a results file that is no shard).

Names read from the files (the model's, the tasks') are checked where they become paths
(``_json_files.checked_name``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from lm_eval_dcpmi.errors import DCPMIError
from lm_eval_dcpmi.task import Shard
from lm_eval_dcpmi.verification import built_task, option_variant

FORGED = "no run of dcpmi run --shard writes it; the file is edited or forged"


def recorded_shard(path: Path, recorded: Any) -> Shard:
    """The shard a results file records under ``dcpmi.shard``; a ``DCPMIError`` naming the
    file when it is none, or not K/N with 1 <= K <= N."""
    if not isinstance(recorded, Mapping) or not {"index", "count"} <= set(recorded):
        raise DCPMIError(
            f"{path}: not a shard (its results record no dcpmi.shard); dcpmi merge joins the "
            "--output_path folders of `dcpmi run --shard K/N`."
        )
    index, count = recorded["index"], recorded["count"]
    whole = all(isinstance(v, int) and not isinstance(v, bool) for v in (index, count))
    if not whole or not 1 <= index <= count:
        raise DCPMIError(
            f"{path}: records shard {index!r}/{count!r} (dcpmi.shard), not K/N with "
            f"1 <= K <= N; {FORGED}."
        )
    return Shard(index, count)


def check_split_sizes(
    shards: Sequence[Any],
    data_dir: str | None = None,
    include_path: Sequence[str] = (),
    tokenizer: str | None = None,
) -> None:
    """Each shard's (a ``_merge.ShardRun``) recorded split size of each task against the
    task built here, and its N against that size (see the module's docstring)."""
    built: dict[str, int] = {}
    for run in shards:
        for name, task in run.submission.tasks.items():
            if task.is_group:
                continue
            where = f"{run} ({name})"
            recorded = task.n_total
            if recorded is None or recorded < 1:
                raise DCPMIError(
                    f"{where}: records no split size (n-samples.{name}.original is "
                    f"{recorded!r}); {FORGED}."
                )
            if run.shard.count > recorded:
                raise DCPMIError(
                    f"{where}: a shard of {run.shard.count}, but the split has {recorded} "
                    f"documents, so some shards would hold none (dcpmi run --shard refuses "
                    f"that); {FORGED}."
                )
            if not _looked_up(name):  # lm-eval takes an unknown name for a path
                raise DCPMIError(f"{where}: names no task lm-eval could look up; {FORGED}.")
            if name not in built:
                metadata = run.submission.tokenizer_args(tokenizer)
                # a --dcpmi_task variant: its YAML written again from the recorded option
                with option_variant(name, task.metadata) as variant:
                    paths = (*include_path, *variant)
                    built[name] = len(built_task(name, metadata, data_dir, paths).eval_docs)
            if recorded != built[name]:
                raise DCPMIError(
                    f"{where}: records a split of {recorded} documents "
                    f"(n-samples.{name}.original), but {name} built here from the data has "
                    f"{built[name]}; the shard is not of this data (check --data_dir)."
                )


def _looked_up(name: str) -> bool:
    """Whether lm-eval can look ``name`` up at all: printable UTF-8 text (a lone surrogate
    read from a JSON escape ended in a traceback)."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return name.isprintable()


def check_documents_once(name: str, shares: Sequence[tuple[str, Sequence[Mapping]]]) -> None:
    """No document of ``name`` in two shards (``shares``: each shard's label and samples)."""
    seen: dict[Any, str] = {}
    for label, samples in shares:
        for sample in samples:
            doc_id = sample.get("doc_id")
            if doc_id in seen:
                raise DCPMIError(
                    f"{label} and {seen[doc_id]} both hold document {doc_id} of {name}: the "
                    "shards overlap; give each shard of one run once."
                )
            seen[doc_id] = label


def check_out(out: Path, paths: Sequence[Path]) -> None:
    """``--out`` neither a shard's folder nor inside one (``paths``: the shards as given:
    folders, or results files, whose folder counts)."""
    target = out.resolve()
    for path in paths:
        folder = (path if path.is_dir() else path.parent).resolve()
        if target == folder or folder in target.parents:
            raise DCPMIError(
                f"--out {out}: inside the shard folder {path}, where the merged results file "
                "would be read as a shard the next time; give a folder outside the shards."
            )
