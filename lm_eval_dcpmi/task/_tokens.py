"""Token counts for ``acc_avg`` and ``truncated``, split as lm-eval's HF models split a request.

The tokenizer comes from the model arguments that lm-eval copies into every task's
metadata; ``token_counter_for`` loads it once per distinct set of arguments.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from typing import Any

from lm_eval_dcpmi.errors import DCPMIConfigError

# Text written like a special token: '<|endoftext|>', '<|im_end|>', '<|eot_id|>' (GPT-2,
# ChatML, Llama 3 style) or SentencePiece's '<s>' and '</s>'.
_SPECIAL_LOOKING = re.compile(r"<\|[^<>|\s]+\|>|</?s>")


def literal_special_tokens(texts: Iterable[str], tokenizer: Any) -> dict[str, int]:
    """Special-token-looking substrings of ``texts`` that ``tokenizer`` does not encode as
    one special (added) token, each with the number of tokens it becomes instead.

    ``'<|endoftext|>'`` is one token for GPT-2-style tokenizers (and SmolLM2); for a
    tokenizer without it, the harness scores its 13 characters as ordinary text.
    """
    found = {match for text in texts for match in _SPECIAL_LOOKING.findall(text)}
    if not found:
        return {}
    special = set(getattr(tokenizer, "all_special_tokens", None) or [])
    get_added_vocab = getattr(tokenizer, "get_added_vocab", None)
    if callable(get_added_vocab):
        special.update(get_added_vocab())
    literal = {}
    for text in sorted(found):
        n_tokens = len(tokenizer.encode(text, add_special_tokens=False))
        if n_tokens != 1 or text not in special:
            literal[text] = n_tokens
    return literal


def literal_special_token_warnings(
    texts: Iterable[str], tokenizer: Any, task: str, source: str
) -> list[str]:
    """One warning per special-token-looking text (SST-5's ``<|endoftext|>``) in a task's
    options or domain contexts that ``tokenizer`` lacks: the model then scores the literal
    characters, not the token the task's author meant."""
    eos = getattr(tokenizer, "eos_token", None)
    name = getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__
    return [
        f"{task}: the options or domain premise contain {literal!r}, which the tokenizer "
        f"{name} does not have as one special token; the model scores these {len(literal)} "
        f"characters as ordinary text ({n_tokens} tokens), not as a special token."
        + (f" This tokenizer's end-of-sequence token is {eos!r}." if eos else "")
        + f" To score another token, copy the task's YAML ({source}), replace {literal!r} "
        "there and pass its folder with --include_path."
        for literal, n_tokens in literal_special_tokens(texts, tokenizer).items()
    ]


class TokenCounter:
    """Counts tokens the way lm-eval's HF models split a (context, continuation) pair."""

    def __init__(self, tokenizer: Any, max_length: int, add_bos_token: bool | None) -> None:
        self.tokenizer = tokenizer
        self.max_length = max_length
        self._encode_kwargs = {} if add_bos_token is None else {"add_special_tokens": add_bos_token}

    @functools.lru_cache(maxsize=4096)  # noqa: B019 - one counter per tokenizer, kept for the run
    def _encode(self, text: str) -> int:
        return len(self.tokenizer.encode(text, **self._encode_kwargs))

    def split(self, context: str, continuation: str) -> tuple[int, int]:
        """(context tokens, continuation tokens) as ``TemplateLM._encode_pair`` splits them."""
        if context == "":  # TemplateLM.loglikelihood: the prefix token is the context
            return 1, len(self.tokenizer.encode(continuation, add_special_tokens=False))
        spaces = len(context) - len(context.rstrip())
        if spaces:  # lm-eval moves the context's trailing whitespace into the continuation
            context, continuation = context[:-spaces], context[-spaces:] + continuation
        n_context = self._encode(context)
        return n_context, self._encode(context + continuation) - n_context


# Model arguments (as lm-eval copies them into task metadata) that decide the tokenizer.
TOKENIZER_ARGS = (
    "pretrained",
    "tokenizer",
    "gguf_file",
    "revision",
    "subfolder",
    "trust_remote_code",
    "use_fast_tokenizer",
    "add_bos_token",
    "max_length",
)


def _as_bool(value: Any) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    return str(value).strip().lower() in ("1", "true", "yes")


# Tokenizers loaded in this process, by the model arguments that decide them: a model's
# own (``hf-prefix`` shares it when it loads) or one loaded here for counting (which
# ``hf-prefix`` then takes instead of loading it again). Loading a GGUF file's tokenizer
# and config takes 10-30 s.
_LOADED: dict[tuple, tuple[Any, int | None]] = {}
_FLAGS = ("trust_remote_code", "use_fast_tokenizer", "add_bos_token")


def _tokenizer_key(args: Mapping[str, Any]) -> tuple | None:
    name = args.get("tokenizer") or args.get("pretrained")
    if not isinstance(name, str) or not name:
        return None
    return tuple(
        _as_bool(args.get(key)) if key in _FLAGS else str(args.get(key) or "")
        for key in TOKENIZER_ARGS
        if key != "max_length"
    )


def share_tokenizer(args: Mapping[str, Any], tokenizer: Any, max_length: int | None) -> None:
    """Make ``tokenizer`` (loaded for the model arguments ``args``) the one counting uses."""
    key = _tokenizer_key(args)
    if key is not None:
        _LOADED[key] = (tokenizer, max_length)


def shared_tokenizer(args: Mapping[str, Any]) -> Any | None:
    """A tokenizer already loaded in this process for the model arguments ``args``."""
    key = _tokenizer_key(args)
    return _LOADED.get(key, (None, None))[0] if key is not None else None


def counter_for_metadata(metadata: Mapping[str, Any] | None) -> TokenCounter | None:
    """The token counter for a task's metadata (the model arguments), None when it names no
    tokenizer (e.g. an API model). A tokenizer that is named but cannot be loaded raises
    ``DCPMIConfigError``: better at start-up than after hours of scoring."""
    args = {key: (metadata or {}).get(key) for key in TOKENIZER_ARGS}
    args = {key: value for key, value in args.items() if value not in (None, "")}
    if "max_length" not in args and (metadata or {}).get("max_model_len"):
        args["max_length"] = metadata["max_model_len"]  # vLLM's name for the window
    if not isinstance(args.get("pretrained", args.get("tokenizer")), str):
        return None  # a model object or nothing: no tokenizer name to load
    try:
        return token_counter_for(**{k: str(v) if k != "max_length" else v for k, v in args.items()})
    except DCPMIConfigError:
        raise
    except Exception as err:  # transformers raises many types for a bad name or file
        shown = ", ".join(f"{k}={v}" for k, v in args.items())
        raise DCPMIConfigError(
            f"acc_avg counts tokens with the model's tokenizer, and it could not be loaded "
            f"from the model arguments ({shown}): {type(err).__name__}: {err}. Fix the model "
            "arguments, or name a loadable tokenizer with --metadata "
            '\'{"tokenizer": "..."}\'.'
        ) from err


@functools.lru_cache(maxsize=8)
def token_counter_for(
    *,
    pretrained: str | None = None,
    tokenizer: str | None = None,
    gguf_file: str | None = None,
    revision: str | None = None,
    subfolder: str | None = None,
    trust_remote_code: str | bool | None = None,
    use_fast_tokenizer: str | bool | None = None,
    add_bos_token: str | bool | None = None,
    max_length: int | str | None = None,
) -> TokenCounter | None:
    """The token counter for a model's args, or None when no tokenizer can be known.

    The tokenizer is loaded as lm-eval's ``HFLM._create_tokenizer`` loads it.
    """
    name = tokenizer or pretrained
    if name is None:
        return None
    args = {k: v for k, v in locals().items() if k in TOKENIZER_ARGS}
    add_bos = _as_bool(add_bos_token)
    key = _tokenizer_key(args)
    if key in _LOADED:  # the model's own (or an earlier load): no second load
        loaded, model_max_length = _LOADED[key]
        if max_length or model_max_length:
            return TokenCounter(loaded, int(max_length or model_max_length), add_bos)
    import transformers

    from lm_eval_dcpmi import embedded
    from lm_eval_dcpmi._harness import resolve_max_length

    if embedded.is_embedded_file(pretrained, gguf_file):
        embedded.parse_once()  # the tokenizer and config parse its file 4 times otherwise

    kwargs: dict[str, Any] = {"trust_remote_code": bool(_as_bool(trust_remote_code))}
    if revision:
        kwargs["revision"] = revision
    if subfolder:
        kwargs["subfolder"] = subfolder
    if gguf_file and not tokenizer:
        kwargs["gguf_file"] = gguf_file
    elif use_fast_tokenizer is not None:
        kwargs["use_fast"] = _as_bool(use_fast_tokenizer)
    if add_bos is not None:
        kwargs["add_bos_token"] = add_bos
    loaded = _LOADED.get(key, (None, None))[0] or transformers.AutoTokenizer.from_pretrained(
        name, **kwargs
    )
    share_tokenizer(args, loaded, None)
    if not max_length:
        config_kwargs = {k: v for k, v in kwargs.items() if k not in ("use_fast", "add_bos_token")}
        try:
            config = transformers.AutoConfig.from_pretrained(pretrained or name, **config_kwargs)
        except (OSError, ValueError):
            config = None
        max_length = resolve_max_length(config, loaded)
    return TokenCounter(loaded, int(max_length), add_bos)
