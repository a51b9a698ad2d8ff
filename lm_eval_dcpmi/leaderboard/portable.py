"""Results files that name their model portably: ``dcpmi run``'s ``--model_id`` and the
rewrite of the files it wrote (``identity.make_portable``), and of any lm-eval results file
(``portable_results_file``, which ``scripts/make_results.py --add`` uses)."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from lm_eval_dcpmi import __version__
from lm_eval_dcpmi.errors import DCPMIError
from lm_eval_dcpmi.json_files import read_json, write_json
from lm_eval_dcpmi.leaderboard.identity import (
    NO_PRETRAINED,
    ModelIdentity,
    check_hub_id,
    identify,
    make_portable,
    recorded_identity,
)

MODEL_ID_OPTION = "--model_id"


def split_model_id(argv: Sequence[str]) -> tuple[str | None, list[str]]:
    """``--model_id ORG/NAME`` (or ``--model_id=ORG/NAME``) out of ``argv``, and the rest."""
    model_id, rest = None, []
    args = iter(argv)
    for arg in args:
        if arg == MODEL_ID_OPTION:
            model_id = next(args, None)
            if model_id is None:
                raise DCPMIError(f"{MODEL_ID_OPTION} needs a value: the model's hub id, ORG/NAME.")
        elif arg.startswith(MODEL_ID_OPTION + "="):
            model_id = arg.partition("=")[2]
        else:
            rest.append(arg)
    return (None if model_id is None else check_hub_id(model_id)), rest


def model_args_of(data: dict[str, Any]) -> dict[str, Any]:
    """The model arguments a results dict records (lm-eval writes a dict or ``a=b,c=d``)."""
    from lm_eval_dcpmi.report.results import model_args

    config = data.get("config") if isinstance(data.get("config"), dict) else {}
    return model_args(config)


def portable_results(
    data: dict[str, Any], model_id: str | None = None, plugin_version: str | None = None
) -> dict[str, Any]:
    """``data`` with its model named portably and no path of this machine in it
    (``plugin_version``: record it as the plugin that made the results)."""
    args = model_args_of(data)
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


def portable_results_file(
    path: Path,
    model_id: str | None = None,
    plugin_version: str | None = None,
    recorded: Mapping[str, Any] | None = None,
) -> ModelIdentity:
    """Rewrite the results file ``path`` portably (numbers untouched); its identity.
    ``recorded``: more entries for its ``dcpmi`` block (``dcpmi run --shard``'s shard)."""
    data = portable_results(read_json(path), model_id, plugin_version)
    data["dcpmi"].update(recorded or {})
    write_json(path, data)
    return ModelIdentity(**data["dcpmi"]["model"])


def after_run(
    written: Sequence[Path], model_id: str | None, recorded: Mapping[str, Any] | None = None
) -> None:
    """``dcpmi run``'s last step: the results files the run wrote name the model portably
    (and record ``recorded`` in their ``dcpmi`` block); a model that has no id gets one
    warning saying how to name it."""
    for path in written:
        identity = portable_results_file(path, model_id, __version__, recorded)
        if identity.id is None and identity.local_name and identity.how != NO_PRETRAINED:
            print(
                f"dcpmi: warning: {path} names the model {identity.name} ({identity.how}); "
                f"give {MODEL_ID_OPTION} ORG/NAME (its hub id) to name it for leaderboards "
                "(dcpmi export asks for it).",
                file=sys.stderr,
            )
