"""The answer cache of ``--use_cache`` is tied to the model: ``dcpmi run`` (and plain
``lm_eval`` or the Python API with the plugin installed, through ``_autoload``) records the
model beside the cache, ``PATH.dcpmi-model.json``, and refuses a cache of another model.

A model read from files on this machine is known by their digests (``weights``: the sha256
of its GGUF file, or of its folder's weights, config and tokenizer files), not by its
folder: other weights under the same path are another model, and the same files in another
folder (a copy, a renamed folder, a rebuilt environment's embedded model) are the same
model. The digests are kept between runs (``_identity.files_sha256``), so a file is hashed
again only when it changed. A model named by a hub id alone is known by its id and revision.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from lm_eval_dcpmi.errors import DCPMIError

CACHE_FILE = re.compile(r"_rank\d+\.db$")


def use_cache_files(use_cache: str) -> list[Path]:
    """The SQLite files of ``--use_cache PATH`` that exist: lm-eval opens
    ``PATH_rank<N>.db`` per process (lm_eval/evaluator.py, ``simple_evaluate``)."""
    prefix = Path(use_cache).expanduser()
    try:
        candidates = list(prefix.parent.iterdir())
    except OSError:
        return []
    return sorted(
        path
        for path in candidates
        if path.name.startswith(prefix.name) and CACHE_FILE.fullmatch(path.name[len(prefix.name) :])
    )


CACHE_OWNER_SUFFIX = ".dcpmi-model.json"


# The arguments, besides the files, that make a model's answers.
LOADING = ("model", "gguf_file", "revision", "dtype")


def cache_owner(model: Any, model_args: Any) -> dict[str, Any]:
    """What names the model whose answers a ``--use_cache`` cache holds: lm-eval's model
    name, the model's identity (hub id, revision, GGUF file and its sha256), the folder or
    id it was loaded from and, for a model read from files here, each file's sha256
    (``weights``)."""
    from lm_eval_dcpmi._harness._model_args import parse_model_args
    from lm_eval_dcpmi._identity import identify, weights_sha256

    args = parse_model_args(model_args)
    identity = identify(args)
    pretrained = args.get("pretrained")
    if isinstance(pretrained, str) and Path(pretrained).expanduser().exists():
        pretrained = str(Path(pretrained).expanduser().resolve())
    loaded = {k: args.get(k) for k in ("gguf_file", "revision", "dtype") if args.get(k)}
    owner = {"model": model, "identity": identity.as_dict(), "pretrained": pretrained, **loaded}
    gguf = identity.file_sha256
    weights = {str(args["gguf_file"]): gguf} if gguf else weights_sha256(args)
    return {**owner, "weights": weights} if weights else owner


def _describe(owner: dict[str, Any]) -> str:
    identity = owner.get("identity")
    identity = identity if isinstance(identity, dict) else {}
    name = identity.get("id") or owner.get("pretrained") or identity.get("local_name")
    details = [f"{k}={owner[k]}" for k in ("gguf_file", "revision", "dtype") if owner.get(k)]
    digest = identity.get("file_sha256")
    if isinstance(digest, str) and digest:
        details.append(f"file sha256 {digest[:12]}...")
    shown = f" ({', '.join(details)})" if details else ""
    return f"{owner.get('model')} {name or 'with no pretrained'}{shown}"


def recorded_weights(recorded: dict[str, Any]) -> dict[str, str] | None:
    """The file digests a record names: its ``weights``, or for an older plugin's record of
    a GGUF file, that file's sha256 in its identity; None where it names none."""
    weights = recorded.get("weights")
    if isinstance(weights, dict):
        ok = weights and all(isinstance(v, str) for v in weights.values())
        return weights if ok else None
    identity = recorded.get("identity")
    if "weights" not in recorded and isinstance(identity, dict):
        file, digest = identity.get("file"), identity.get("file_sha256")
        if isinstance(file, str) and isinstance(digest, str):
            return {file: digest}
    return None


def difference(recorded: Any, owner: dict[str, Any]) -> str | None:
    """Why the record names another model than ``owner`` (an empty text where its
    description says it), or None when it names ``owner``'s model. A model read from files
    here is its files (``weights``) read with the same arguments (``LOADING``), wherever
    they lie; any other model is named by the record exactly."""
    if recorded == owner:
        return None
    if not isinstance(recorded, dict):
        return ""
    weights = owner.get("weights")
    if not weights:
        return ""
    if any(recorded.get(k) != owner.get(k) for k in LOADING):
        return ""
    known = recorded_weights(recorded)
    if known is None:
        return "the record holds no digest of the model's files: an older plugin's record"
    if known == weights:
        return None
    names = sorted(name for name in {*known, *weights} if known.get(name) != weights.get(name))
    if len(names) == 1:
        return f"its {names[0]} is not the recorded file"
    more = f", {len(names) - 3} more" if len(names) > 3 else ""
    return f"its {', '.join(names[:3])}{more} are not the recorded files"


def same_model(recorded: Any, owner: dict[str, Any]) -> bool:
    """Whether the record names ``owner``'s model (``difference``)."""
    return difference(recorded, owner) is None


def check_cache_owner(config: Any) -> None:
    """A ``--use_cache`` cache answers for one model: ``dcpmi run`` records the model beside
    it (``PATH.dcpmi-model.json``) and refuses the cache for another model, or one whose
    model is not recorded (made by plain lm_eval), before the model loads."""
    if config.use_cache is None:
        return
    record = Path(f"{config.use_cache}{CACHE_OWNER_SUFFIX}").expanduser()
    try:
        owner = cache_owner(config.model, config.model_args)
    except OSError as problem:
        where = f"{problem.filename}: " if problem.filename else ""
        raise DCPMIError(
            f"--use_cache {config.use_cache}: the model's files, which tie the cache to the "
            f"model, cannot be read ({where}{problem.strerror or problem})."
        ) from None
    caches = use_cache_files(config.use_cache)
    if record.is_file():
        try:
            recorded = json.loads(record.read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError):
            recorded = None
        why = difference(recorded, owner)
        if why is not None:
            shown = _describe(recorded) if isinstance(recorded, dict) else "an unreadable record"
            raise DCPMIError(
                f"--use_cache {config.use_cache}: the cache holds the answers of {shown} "
                f"({record.name}), not of {_describe(owner)}{f' ({why})' if why else ''}; "
                "give this model its own --use_cache path (an answer cache is keyed by "
                "request, not by model)."
            )
        return
    if caches:
        raise DCPMIError(
            f"--use_cache {config.use_cache}: {caches[0].name} holds answers of a model no "
            f"record names (no {record.name}; made by plain lm_eval or an older plugin), so "
            f"they may be another model's; delete it, or give another --use_cache path."
        )
    record.parent.mkdir(parents=True, exist_ok=True)
    record.write_text(json.dumps(owner, indent=2) + "\n", encoding="utf-8")
