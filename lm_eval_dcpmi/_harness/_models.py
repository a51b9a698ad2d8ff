"""lm-eval's model side: registering a model by name, and a model's context length as
``HFLM`` finds it (``HFLM``'s private hooks: ``hflm.py``)."""

from __future__ import annotations

from typing import Any


def reads_plugin_entry_points(registry: Any = None) -> bool:
    """Whether the installed lm-eval registers models from the ``lm_eval.models`` entry points
    itself: lm-eval's main branch after its PR #4013 (``lm_eval.api.registry.load_plugins``,
    lazily, an alias already registered skipped). No release has it yet (0.4.12, 0.4.13,
    0.5.0.dev1): there the start-up hook registers the plugin's models. ``registry``: the
    module to look at (lm-eval's by default)."""
    if registry is None:
        from lm_eval.api import registry
    return callable(getattr(registry, "load_plugins", None))


def register_model(name: str, target: str) -> None:
    """Register the model class ``target`` (``"module:Class"``) under ``name``, lazily
    (unless lm-eval knows the name): 0.4's ``model_registry.register(name, target=...)``
    (``lm_eval/api/registry.py``) imports the module only when the model is asked for."""
    from lm_eval.api.registry import model_registry

    if name not in model_registry:
        model_registry.register(name, target=target)


def resolve_max_length(config: Any, tokenizer: Any) -> int:
    """A model's context length from its config, else its tokenizer, else 2048: lm-eval's
    ``lm_eval.models.utils.resolve_max_length`` (0.4.13), or in 0.4.12 the same steps of
    ``HFLM.max_length`` (``lm_eval/models/huggingface.py``), which does not look at a
    composite config's ``text_config``."""
    try:
        from lm_eval.models.utils import resolve_max_length as lm_evals
    except ImportError:  # lm-eval 0.4.12
        for attr in ("n_positions", "max_position_embeddings", "n_ctx"):
            if hasattr(config, attr):
                return int(getattr(config, attr))
        length = getattr(tokenizer, "model_max_length", None)
        unset = length is None or length == 1000000000000000019884624838656  # "infinity"
        return 2048 if unset else int(length)
    return int(lm_evals(config, tokenizer))


def load_model(name: str, model_args: dict[str, Any], **settings: Any) -> Any:
    """lm-eval's model ``name`` built from ``model_args`` (and ``device``, ``batch_size``),
    as ``simple_evaluate`` builds it from a model name: 0.4's ``get_model(name)``
    (``lm_eval/api/registry.py``) and the class's ``create_from_arg_obj``."""
    from lm_eval.api.registry import get_model

    from lm_eval_dcpmi import embedded

    if embedded.is_embedded_file(model_args.get("pretrained"), model_args.get("gguf_file")):
        embedded.parse_once()
    return get_model(name).create_from_arg_obj(
        dict(model_args), {k: v for k, v in settings.items() if v is not None}
    )


def loglikelihoods(lm: Any, requests: list[tuple[str, str]]) -> list[float]:
    """The model's loglikelihood of each (context, continuation), scored as a run scores
    them: lm-eval ``Instance`` requests through ``lm.loglikelihood``."""
    from lm_eval.api.instance import Instance

    instances = [
        Instance(request_type="loglikelihood", doc={}, arguments=pair, idx=i)
        for i, pair in enumerate(requests)
    ]
    return [float(answer[0]) for answer in lm.loglikelihood(instances)]
