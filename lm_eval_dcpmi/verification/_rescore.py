"""``dcpmi verify RESULTS --rescore N``: score documents again with the model the results name.

A recompute proves a submission consistent with itself and with the data; it cannot tell
another model's genuine run relabelled as this model's. Scoring requests again can: for
each task, N logged documents (or all) are drawn with a seed that the output prints, each
one's requests (rebuilt from the data by ``_verify``) are scored by the model the results
name, and each loglikelihood must equal the logged one within ``tolerance`` (absolute,
in nats: other batches, backends or cores move fp32 results by ~1e-4; another model moves
them by whole nats).

The model: the embedded one by its id and file digest (the installed file must be the one
the run read), a hub id at its recorded revision, or what ``--model``/``--model_args`` give.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from lm_eval_dcpmi.errors import DCPMIError
from lm_eval_dcpmi.verification._recompute import Finding, logged_number
from lm_eval_dcpmi.verification._submission import Submission, kept_model_args

DEFAULT_TOLERANCE = 2e-3
# The fractions of forged documents the output gives its chance of catching.
FRACTIONS = (0.01, 0.05, 0.10)


@dataclass(frozen=True)
class RescoreOptions:
    count: int | None  # documents per task; None: every one
    seed: int
    tolerance: float = DEFAULT_TOLERANCE
    model: str | None = None  # lm-eval's model name (default: the run's)
    model_args: str | None = None  # a=b,c=d (default: from the results' identity)
    device: str | None = None
    batch_size: int = 8


def parse_count(value: str) -> int | None:
    """``--rescore N`` (a whole number, 1 or more) or ``all`` (None)."""
    if value == "all":
        return None
    if value.isdecimal() and int(value) > 0:
        return int(value)
    raise DCPMIError(
        f"--rescore {value!r}: give how many documents of each task to score again (e.g. "
        "--rescore 20), or all."
    )


def check_tolerance(value: float) -> float:
    """``--tolerance``: a finite number, 0 or more (a negative one fails every request, NaN
    or infinity none)."""
    if not (math.isfinite(value) and value >= 0):
        raise DCPMIError(
            f"--tolerance {value!r}: give the largest |loglikelihood difference| accepted, a "
            f"number 0 or more in nats (default {DEFAULT_TOLERANCE:g})."
        )
    return value


# What --rescore loads from a results file's own record when not told --model: models
# loaded from their weights by hub id, with only the recorded arguments that choose how
# (never trust_remote_code, a folder, or a server's address).
RECORDED_MODELS = ("hf", "hf-prefix", "huggingface")
RECORDED_MODEL_ARGS = ("dtype", "gguf_file", "subfolder", "add_bos_token", "max_length",
                       "use_fast_tokenizer")  # fmt: skip


def model_to_load(
    submission: Submission, options: RescoreOptions
) -> tuple[str, dict[str, Any], str]:
    """(lm-eval model name, its arguments, how it is named in the output) for the model
    the results name; a ``DCPMIError`` when it cannot be known or is not the one that ran."""
    from lm_eval_dcpmi import embedded
    from lm_eval_dcpmi._harness import parse_model_args
    from lm_eval_dcpmi._identity import EMBEDDED_ID, RANDOM_MODELS, installed_embedded_sha256

    data = submission.data
    config = data.get("config") if isinstance(data.get("config"), dict) else {}
    name = options.model or str(config.get("model") or "hf")
    if name in RANDOM_MODELS:
        raise DCPMIError(
            f"{submission.path}: the run's model is lm-eval's {name!r}; give --model and "
            "--model_args of the model the results name."
        )
    if options.model is None and name not in RECORDED_MODELS:
        # a served model's recorded base_url would send this machine's API key anywhere
        raise DCPMIError(
            f"{submission.path}: the run's model is lm-eval's {name!r}, which --rescore "
            f"does not load from a submitted file (only {', '.join(RECORDED_MODELS)}); give "
            "--model and --model_args of the model the results name."
        )
    identity = submission.model
    if options.model_args is not None:
        args = parse_model_args(options.model_args, option="--model_args")
        return name, args, f"{name} ({options.model_args})"
    if identity.id == EMBEDDED_ID and identity.file == embedded.GGUF_FILE:
        installed = installed_embedded_sha256()
        if installed is None:
            raise DCPMIError(
                f"{submission.path}: the run's model is the embedded one; "
                + embedded.missing_message()
            )
        if identity.file_sha256 and identity.file_sha256 != installed:
            raise DCPMIError(
                f"{submission.path}: the run read {identity.file} with sha256 "
                f"{identity.file_sha256[:16]}..., the installed one is {installed[:16]}...: the "
                "model the results name is not at hand."
            )
        return name, dict(embedded.model_args()), f"{name}, the embedded {identity.id}"
    if identity.id:
        recorded = kept_model_args(submission.data, RECORDED_MODEL_ARGS)
        revision = {"revision": identity.revision} if identity.revision else {}
        args = {**recorded, "pretrained": identity.id, **revision}
        return (
            name,
            args,
            f"{name}, {identity.id}" + (f" at {identity.revision}" if revision else ""),
        )
    raise DCPMIError(
        f"{submission.path}: names its model by no hub id ({identity.name}), so it cannot be "
        "loaded by name; give --model_args pretrained=FOLDER (the model to check it against)."
    )


def chosen(ids: Sequence[int], count: int | None, rng: random.Random) -> list[int]:
    """``count`` of ``ids`` drawn without replacement (every one for None), sorted."""
    if count is None or count >= len(ids):
        return sorted(ids)
    return sorted(rng.sample(sorted(ids), count))


def catch_chance(documents: int, drawn: int, fraction: float) -> float:
    """The chance that ``drawn`` documents of ``documents``, drawn without replacement,
    include one of the ``ceil(fraction * documents)`` forged ones."""
    forged = math.ceil(fraction * documents)
    if drawn >= documents or forged == 0:
        return 1.0 if forged else 0.0
    missed = 1.0
    for i in range(drawn):
        missed *= max(documents - forged - i, 0) / (documents - i)
    return 1.0 - missed


@dataclass
class TaskToRescore:
    """A verified task: its rebuilt requests and the loglikelihoods its samples log."""

    name: str
    where: str
    requests: dict[int, list[tuple[str, str]]]  # doc id -> (context, continuation) pairs
    logged: dict[int, list[float]]  # doc id -> logged loglikelihoods, request order


def rescore(
    submission: Submission, tasks: Sequence[TaskToRescore], options: RescoreOptions
) -> tuple[list[str], list[Finding]]:
    """Score the drawn documents of ``tasks`` again (see the module's docstring): the lines
    saying what was covered, and a finding for every request past the tolerance."""
    from lm_eval_dcpmi._harness import load_model, loglikelihoods

    name, args, described = model_to_load(submission, options)
    try:
        lm = load_model(name, args, device=options.device or "cpu", batch_size=options.batch_size)
    except DCPMIError:
        raise
    except Exception as error:  # transformers and lm-eval raise many kinds for a model
        raise DCPMIError(
            f"{submission.path}: the model to score again ({described}) could not be loaded: "
            f"{type(error).__name__}: {error}"
        ) from None
    rng = random.Random(options.seed)
    lines = [f"{submission.path}: rescoring with {described}, seed {options.seed}"]
    findings: list[Finding] = []
    for task in tasks:
        docs = chosen(list(task.requests), options.count, rng)
        pairs = [pair for d in docs for pair in task.requests[d]]
        scored = iter(loglikelihoods(lm, pairs))
        largest, past = 0.0, []
        for doc in docs:
            for index, old in enumerate(task.logged[doc]):
                new = next(scored)
                gap = (
                    abs(new - old)
                    if math.isfinite(new) and math.isfinite(old)
                    else (0.0 if new == old else math.inf)
                )
                largest = max(largest, gap)
                if not gap <= options.tolerance:
                    past.append(
                        Finding(
                            task.where,
                            f"doc {doc}: request {index} scores {new:.6f} with {described}, but "
                            f"the samples log {old:.6f} (|dll| {gap:.3g} > {options.tolerance:g})",
                        )
                    )
        findings += past[:5] + (
            [Finding(task.where, f"and {len(past) - 5} more requests past the tolerance")]
            if len(past) > 5 else []
        )  # fmt: skip
        chances = ", ".join(
            f"{100 * f:g}%: {catch_chance(len(task.requests), len(docs), f):.2f}" for f in FRACTIONS
        )
        lines.append(
            f"{task.name}: rescored {len(docs)} of {len(task.requests)} documents ({len(pairs)} "
            f"requests): largest |dll| {largest:.2g} (tolerance {options.tolerance:g}); chance "
            f"of catching a forgery of a share of its documents: {chances}"
        )
    return lines, findings


def logged_loglikelihoods(sample: dict[str, Any]) -> list[float]:
    """A sample's logged loglikelihoods, in request order."""
    from lm_eval_dcpmi._harness import logged_loglikelihood

    return [logged_number(logged_loglikelihood(r)) for r in sample["filtered_resps"]]
