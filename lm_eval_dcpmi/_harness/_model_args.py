"""The model arguments (``--model_args``, a results file's ``config.model_args``) read the one
way lm-eval reads them: ``lm_eval.utils.simple_parse_args_string`` (the same function in
0.4.12, 0.4.13 and 0.5.0.dev1; the typing of values differs a little between them)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lm_eval_dcpmi.errors import DCPMIError


def parse_model_args(value: object, *, option: str | None = None) -> dict[str, Any]:
    """The model arguments as lm-eval passes them to the model: a mapping as given (a copy);
    ``a=b,c=d`` text through lm-eval's own parser (values typed as lm-eval types them: ``8``
    an int, ``true`` a bool); None or anything else ``{}``.

    ``option``: the text is the command line's (``--model_args``): an item without ``=`` or
    with no key is refused in one line naming the option (lm-eval would hand the model a
    key with the value ``''``). Lm-eval is imported only for text: ``dcpmi report`` of a
    run by lm-eval's command line, which records a mapping, imports none of it."""
    if isinstance(value, Mapping):
        return dict(value)
    if not isinstance(value, str):
        return {}
    items = [item.strip() for item in value.split(",") if item.strip()]
    if option is not None:
        for item in items:
            key, equals, _value = item.partition("=")
            if not equals or not key:
                raise DCPMIError(
                    f"{option} {value!r}: expected key=value pairs, e.g. pretrained=gpt2."
                )
        value = ",".join(items)
    from lm_eval.utils import simple_parse_args_string

    try:
        return simple_parse_args_string(value)
    except ValueError:  # 0.5.0.dev1: int() of a numeric text such as '²' or 5,000 digits
        pairs = (item.partition("=") for item in value.strip().split(",") if item)
        return {key: text for key, _equals, text in pairs}


def recorded_model_args(results: Mapping[str, Any]) -> dict[str, Any]:
    """The model arguments a results dict records under ``config.model_args`` (lm-eval's
    command line records a mapping, its Python API the text it was given)."""
    config = results.get("config")
    return parse_model_args(config.get("model_args")) if isinstance(config, Mapping) else {}
