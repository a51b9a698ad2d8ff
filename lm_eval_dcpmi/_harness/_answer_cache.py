"""The answer cache of ``--use_cache`` is tied to the model: ``dcpmi run`` (and plain
``lm_eval`` or the Python API with the plugin installed, through ``_autoload``) records the
model beside the cache, ``PATH.dcpmi-model.json``, and refuses a cache of another model.
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


def cache_owner(model: Any, model_args: Any) -> dict[str, Any]:
    """What names the model whose answers a ``--use_cache`` cache holds: lm-eval's model
    name, the model's identity (hub id, revision, GGUF file and its sha256) and the folder
    or id it was loaded from."""
    from lm_eval_dcpmi._harness._model_args import parse_model_args
    from lm_eval_dcpmi._identity import identify

    args = parse_model_args(model_args)
    identity = identify(args)
    pretrained = args.get("pretrained")
    if isinstance(pretrained, str) and Path(pretrained).expanduser().exists():
        pretrained = str(Path(pretrained).expanduser().resolve())
    loaded = {k: args.get(k) for k in ("gguf_file", "revision", "dtype") if args.get(k)}
    return {"model": model, "identity": identity.as_dict(), "pretrained": pretrained, **loaded}


def _describe(owner: dict[str, Any]) -> str:
    identity = owner.get("identity") or {}
    name = identity.get("id") or owner.get("pretrained") or identity.get("local_name")
    details = [f"{k}={owner[k]}" for k in ("gguf_file", "revision", "dtype") if owner.get(k)]
    digest = identity.get("file_sha256")
    if digest:
        details.append(f"file sha256 {digest[:12]}...")
    shown = f" ({', '.join(details)})" if details else ""
    return f"{owner.get('model')} {name or 'with no pretrained'}{shown}"


def same_model(recorded: Any, owner: dict[str, Any]) -> bool:
    """Whether the record names ``owner``'s model. A model read from one file whose sha256
    both name is that file wherever it lies: a rebuilt environment moves the embedded
    model's folder, not its answers."""
    if recorded == owner:
        return True
    if not isinstance(recorded, dict) or not isinstance(recorded.get("identity"), dict):
        return False
    digest = owner["identity"].get("file_sha256")
    if not digest or recorded["identity"].get("file_sha256") != digest:
        return False
    elsewhere = {k: v for k, v in recorded.items() if k != "pretrained"}
    return elsewhere == {k: v for k, v in owner.items() if k != "pretrained"}


def check_cache_owner(config: Any) -> None:
    """A ``--use_cache`` cache answers for one model: ``dcpmi run`` records the model beside
    it (``PATH.dcpmi-model.json``) and refuses the cache for another model, or one whose
    model is not recorded (made by plain lm_eval), before the model loads."""
    if config.use_cache is None:
        return
    record = Path(f"{config.use_cache}{CACHE_OWNER_SUFFIX}").expanduser()
    owner = cache_owner(config.model, config.model_args)
    caches = use_cache_files(config.use_cache)
    if record.is_file():
        try:
            recorded = json.loads(record.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            recorded = None
        if not same_model(recorded, owner):
            shown = _describe(recorded) if isinstance(recorded, dict) else "an unreadable record"
            raise DCPMIError(
                f"--use_cache {config.use_cache}: the cache holds the answers of {shown} "
                f"({record.name}), not of {_describe(owner)}; give this model its own "
                "--use_cache path (an answer cache is keyed by request, not by model)."
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
