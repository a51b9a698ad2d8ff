"""The per-document samples that ``lm_eval ... --log_samples`` writes beside a results file.

lm-eval names them ``samples_<task>_<date>.jsonl`` with the date of ``results_<date>.json``.
Each line is one document: ``arguments`` (the requests' (context, continuation) pairs,
in the blocks of ``rules._layout``: the conditional requests, then one block per reference
context, then on the carrier document the content-free ones), ``filtered_resps`` (the matching
[loglikelihood, is_greedy] pairs), ``target`` and the per-document metric values.
The JSONL file stores arguments as ``{"gen_args_<i>": {"arg_0": ..., "arg_1": ...}}`` and
numbers as strings; ``simple_evaluate`` keeps tuples and floats. Both are read here, and
gzipped files (``samples_<task>_<date>.jsonl.gz``, e.g. the trimmed per-document metrics
that ``scripts/make_results.py --add`` commits for a full run).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lm_eval_dcpmi._harness import logged_loglikelihood
from lm_eval_dcpmi._json_files import checked_name, json_lines, parse_json
from lm_eval_dcpmi.report._results import ReportError, number
from lm_eval_dcpmi.rules import DEFAULT_LAYOUT, Layout, Metric, metric_named

_RESULTS_NAME = re.compile(r"^results_(?P<stamp>.+)\.json$")
_ARGUMENT_KEY = re.compile(r"gen_args_(\d+)")  # the JSONL form's request keys


def samples_files(results_file: Path, tasks: Iterable[str]) -> dict[str, Path]:
    """``task -> samples file`` for the tasks of ``results_file`` that logged samples."""
    match = _RESULTS_NAME.match(results_file.name)
    if match is None:
        return {}
    stamp = match.group("stamp")
    found = {}
    for task in tasks:
        checked_name(task, str(results_file), "the task name", ReportError)
        for suffix in (".jsonl", ".jsonl.gz"):
            path = results_file.with_name(f"samples_{task}_{stamp}{suffix}")
            if path.is_file():
                found[task] = path
                break
    return found


def read_samples(path: Path) -> list[dict[str, Any]]:
    """The samples of one JSONL file; ``ReportError`` names the file and line when one is
    not a JSON object shaped as lm-eval logs a sample (``shape_problem``), and the file
    when it holds none."""
    samples = []
    # bounded: a padded gzip is refused, never read into memory
    for number_, raw in json_lines(path, ReportError, "a samples file"):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            raise ReportError(
                f"{path}:{number_}: cannot be read as a samples file ({error})"
            ) from None
        if not line.strip():
            continue
        sample = parse_json(line, str(path), line=number_, error=ReportError)
        if not isinstance(sample, dict) or "doc_id" not in sample:
            raise ReportError(f"{path}:{number_}: not an lm-eval sample (no doc_id)")
        problem = shape_problem(sample)
        if problem is not None:
            raise ReportError(
                f"{path}:{number_}: {problem}, not what lm-eval logs; the samples file was "
                "edited or is not lm-eval's. Use the samples files of the run as written."
            )
        samples.append(sample)
    if not samples:
        raise ReportError(
            f"{path}: holds no samples (an empty samples file); rerun with --log_samples, or "
            "move the file away."
        )
    return samples


def item_of(value: Any) -> list[Any]:
    """A corpus rule's item as logged: a list, or its JSON text (checked: ``_item_shaped``)."""
    return json.loads(value) if isinstance(value, str) else value


def shape_problem(sample: Mapping[str, Any]) -> str | None:
    """What of a logged sample is not shaped as lm-eval logs it (None when all is): its
    requests (``arguments``), digests (``doc_hash`` ...: ``task_hash`` hashes them), answers
    (``resps``, ``filtered_resps``) and per-document
    values (numbers; a corpus rule's item, a list of probabilities and the gold index).
    The readers index into these; a value of another shape would end in a traceback."""
    for key, value in sample.items():
        if _lone_surrogate(key) or _lone_surrogate(value):
            # lm-eval writes samples as UTF-8, which cannot hold one (a JSON escape, \\ud800,
            # can); hashing, tokenizing or printing it would end in a traceback
            field = _shown(key) if _lone_surrogate(key) else key
            return (
                f"a lone surrogate in its {field}, text that is no UTF-8 and lm-eval cannot "
                "write, so no run logged it"
            )
    arguments = sample.get("arguments")
    if arguments is not None and not _requests_shaped(arguments):
        return f"its arguments {_shown(arguments)} are not (context, continuation) requests"
    for key in HASH_FIELDS:
        digest = sample.get(key)
        if digest is not None and not (isinstance(digest, str) and _SHA256.fullmatch(digest)):
            return f"its {key} {_shown(digest)} is not a sha256 digest (64 hex digits, lm-eval's)"
    for key in ("filtered_resps", "resps"):
        answers = sample.get(key)
        if answers is not None and not (
            isinstance(answers, list) and all(_answer_shaped(a) for a in answers)
        ):
            return (
                f"its {key} {_shown(answers)} are not [loglikelihood, is_greedy] answers (a "
                "loglikelihood is a number, 0 or below)"
            )
    for key, value in sample.items():
        row = metric_named(str(key))
        if row is None:
            continue
        if row.corpus is not None:
            if not _item_shaped(value):
                return (
                    f"its {key} {_shown(value)} is not an item of probabilities and the gold "
                    "option's index"
                )
        elif not _numeric(value):
            return f"its {key} {_shown(value)} is not a number"
        elif not _in_range(row, number(value)):
            what = {"accuracy": "0 or 1", "count": "a count"}.get(row.kind, "0 or more")
            return f"its {key} {_shown(value)} is not {what}"
    return None


def _in_range(row: Metric, value: float) -> bool:
    """A document's value of ``row``: an accuracy's 0 or 1, a count, a measure's 0 or more
    (NaN: not computed)."""
    if math.isnan(value):
        return True
    if row.kind == "accuracy":
        return value in (0.0, 1.0)
    return value >= 0 and (row.kind != "count" or value.is_integer())


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _numeric(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, (int, float)):
        return True
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return True


def _requests_shaped(arguments: Any) -> bool:
    if isinstance(arguments, Mapping):  # the JSONL form: gen_args_<i> -> {arg_0, arg_1}
        keys = [_ARGUMENT_KEY.fullmatch(str(k)) for k in arguments]
        return (
            all(keys)
            and len({int(k.group(1)) for k in keys if k}) == len(keys)
            and all(
                isinstance(v, Mapping)
                and isinstance(v.get("arg_0"), str)
                and isinstance(v.get("arg_1"), str)
                for v in arguments.values()
            )
        )
    return isinstance(arguments, (list, tuple)) and all(
        isinstance(pair, (list, tuple))
        and len(pair) >= 2
        and isinstance(pair[0], str)
        and isinstance(pair[1], str)
        for pair in arguments
    )


def _lone_surrogate(value: Any) -> bool:
    """Whether ``value`` (JSON as read: text, numbers, lists, objects) holds text that is
    no UTF-8: a surrogate without its pair."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return True
        return False
    if isinstance(value, Mapping):
        return any(_lone_surrogate(k) or _lone_surrogate(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return any(_lone_surrogate(item) for item in value)
    return False


def _answer_shaped(answer: Any) -> bool:
    """``[loglikelihood, is_greedy]``, or lm-eval 0.5's (and ``resps``') list of them; a
    loglikelihood is a log-probability, 0 or below (NaN: the model gave none)."""
    while isinstance(answer, (list, tuple)) and answer and isinstance(answer[0], (list, tuple)):
        answer = answer[0]
    if not (isinstance(answer, (list, tuple)) and len(answer) >= 1 and _numeric(answer[0])):
        return False
    return not number(answer[0]) > 0


def _item_shaped(item: Any) -> bool:
    try:
        item = item_of(item)
    except (ValueError, RecursionError):
        return False
    real = (int, float)
    if not isinstance(item, list) or len(item) < 2:
        return False
    if not all(isinstance(x, real) and not isinstance(x, bool) for x in item):
        return False
    *probabilities, gold = (number(x) for x in item)
    return all(math.isnan(p) or 0 <= p <= 1 for p in probabilities) and (
        gold.is_integer() and 0 <= gold < len(probabilities)
    )


@dataclass(frozen=True)
class DocumentOptions:
    """One document's options with their loglikelihoods, from a DC-PMI sample."""

    doc_id: int
    contexts: list[str]  # the conditional requests' contexts (premise), per option
    options: list[str]  # the continuations, in option order
    conditional: list[float]  # log P(option | premise)
    references: dict[str, list[float]]  # log P(option | reference context), by name
    content_free: dict[str, list[float]] | None  # the carrier's content-free scores
    gold: int | None  # index of the correct option; None when the target names none

    @property
    def domain(self) -> list[float]:  # log P(option | domain premise)
        return self.references["domain"]


def task_layout(config: Mapping[str, Any] | None) -> Layout:
    """The request layout of a task from its config in a results file (its metadata names
    the reference contexts and content-free fields; the plain layout otherwise)."""
    metadata = (config or {}).get("metadata")
    if not isinstance(metadata, Mapping):
        return DEFAULT_LAYOUT
    extra = metadata.get("reference_contexts")
    names = tuple(extra) if isinstance(extra, Mapping) else ()
    from lm_eval_dcpmi.task import CONTENT_FREE_INPUTS  # import-light module

    free = CONTENT_FREE_INPUTS if metadata.get("content_free_fields") else ()
    return Layout(("domain", *names), free)


def request_pairs(arguments: Any) -> list[tuple[str, str]]:
    """A sample's requests as (context, continuation) pairs, from either form it is logged in."""
    if isinstance(arguments, Mapping):  # the JSONL form: gen_args_<i> -> {arg_0, arg_1}
        keys = sorted(arguments, key=lambda k: int(str(k).rpartition("_")[2]))
        return [(arguments[k]["arg_0"], arguments[k]["arg_1"]) for k in keys]
    return [(str(args[0]), str(args[1])) for args in arguments]


def _gold(target: Any, requests: Sequence[tuple[str, str]]) -> int | None:
    """The gold index: ``target`` is an index (logged as a string in JSONL) or the option text
    (as written, or without the delimiter lm-eval put in front of it). None for a task of
    several inputs (Winogrande's form, COPA Flipped): its options are the contexts and its
    target the one continuation they share, so the gold index is the document's
    ``doc_to_text``, which a sample does not log (``dcpmi verify`` builds it again)."""
    options = [option for _context, option in requests]
    if len(requests) > 1 and len(set(options)) == 1 and len({c for c, _ in requests}) > 1:
        return None
    if isinstance(target, list):
        target = target[0] if len(target) == 1 else None
    if isinstance(target, (int, float)) and not isinstance(target, bool):
        return int(target) if 0 <= target < len(options) else None
    if isinstance(target, str):
        if re.fullmatch(r"-?[0-9]+", target.strip()):  # not isdigit(): int("¹") fails
            index = int(target)
            return index if 0 <= index < len(options) else None
        for i, option in enumerate(options):
            if option == target or option.strip() == target.strip():
                return i
    return None


def document_options(
    sample: Mapping[str, Any], where: str, layout: Layout = DEFAULT_LAYOUT
) -> DocumentOptions:
    """The options of one DC-PMI sample; ``ReportError`` (naming ``where``) when its requests
    are not the layout's blocks scoring the same options."""
    pairs = request_pairs(sample.get("arguments") or [])
    responses = sample.get("filtered_resps") or []
    doc_id = sample.get("doc_id")
    if not pairs or len(responses) != len(pairs):
        raise ReportError(
            f"{where}: doc {doc_id} has {len(pairs)} requests and {len(responses)} responses "
            "(is this a dcpmi_* task's samples file?)"
        )
    try:
        n_options, carrier = layout.n_options([continuation for _, continuation in pairs])
    except ValueError as error:
        raise ReportError(f"{where}: doc {doc_id}: {error} (not a DC-PMI sample)") from None
    blocks = layout.blocks(pairs, n_options, carrier)
    lls = [number(logged_loglikelihood(response)) for response in responses]
    scores = layout.blocks(lls, n_options, carrier)
    return DocumentOptions(
        doc_id=int(sample["doc_id"]),
        contexts=[context for context, _continuation in blocks.conditional],
        options=[continuation for _context, continuation in blocks.conditional],
        conditional=scores.conditional,
        references=scores.references,
        content_free=scores.content_free,
        gold=_gold(sample.get("target"), blocks.conditional),
    )


HASH_FIELDS = ("doc_hash", "prompt_hash", "target_hash")
_SHA256 = re.compile(r"[0-9a-f]{64}")


def task_hash(samples: Sequence[Mapping[str, Any]]) -> str | None:
    """The hash lm-eval records for a task's samples in its results file (``task_hashes``:
    lm_eval/loggers/evaluation_tracker.py, ``save_results_aggregated``, over every line in
    the order it writes them); None when a line lacks the per-sample hashes (trimmed)."""
    if not samples or not all(
        isinstance(s.get(field), str) for s in samples for field in HASH_FIELDS
    ):
        return None
    joined = "".join(s["doc_hash"] + s["prompt_hash"] + s["target_hash"] for s in samples)
    return hashlib.sha256(joined.encode("utf-8")).hexdigest()


def digest_mismatch(sample: Mapping[str, Any]) -> str | None:
    """Which per-document digest of an lm-eval sample is not that of what the line logs:
    ``doc_hash`` of its ``doc``, ``prompt_hash`` of its first request's context, as lm-eval
    computes them (lm_eval/evaluator.py); None when both match or the line lacks them."""
    doc_hash, doc = sample.get("doc_hash"), sample.get("doc")
    if isinstance(doc_hash, str) and doc is not None:
        text = json.dumps(doc, indent=2, default=str, ensure_ascii=False)
        if hashlib.sha256(text.encode("utf-8")).hexdigest() != doc_hash:
            return "doc_hash"
    prompt_hash, arguments = sample.get("prompt_hash"), sample.get("arguments")
    if isinstance(prompt_hash, str) and arguments:
        try:
            context = request_pairs(arguments)[0][0]
        except (KeyError, TypeError, ValueError, IndexError):
            return None
        if hashlib.sha256(str(context).encode("utf-8")).hexdigest() != prompt_hash:
            return "prompt_hash"
    return None


def domain_contexts(sample: Mapping[str, Any], layout: Layout = DEFAULT_LAYOUT) -> list[str] | None:
    """The contexts of a DC-PMI sample's domain requests; None when the sample does not
    carry its requests (trimmed) or they are not laid out as ``layout`` lays them out."""
    arguments = sample.get("arguments")
    if not arguments:
        return None
    try:
        pairs = request_pairs(arguments)
        n_options, carrier = layout.n_options([option for _context, option in pairs])
        return [context for context, _option in layout.blocks(pairs, n_options, carrier).domain]
    except (KeyError, TypeError, ValueError, IndexError):
        return None
