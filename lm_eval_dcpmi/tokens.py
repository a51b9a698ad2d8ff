"""Token counts for ``acc_avg`` and ``truncated``, split as lm-eval's HF models split a request.

The tokenizer comes from the model arguments that lm-eval copies into every task's
metadata; ``token_counter_for`` loads it once per distinct set of arguments.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from typing import Any

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
        spaces = len(context) - len(context.rstrip())
        if spaces:  # lm-eval moves the context's trailing whitespace into the continuation
            context, continuation = context[:-spaces], context[-spaces:] + continuation
        n_context = self._encode(context)
        return n_context, self._encode(context + continuation) - n_context


@functools.lru_cache(maxsize=8)
def token_counter_for(
    *,
    tokenizer: str | None,
    pretrained: str | None,
    gguf_file: str | None,
    revision: str | None,
    add_bos_token: bool | None,
    max_length: int | None,
) -> TokenCounter | None:
    """The token counter for a model's args, or None when no tokenizer can be known."""
    name = tokenizer or pretrained
    if name is None:
        return None
    import transformers
    from lm_eval.models.utils import resolve_max_length

    kwargs: dict[str, Any] = {"revision": revision} if revision else {}
    if gguf_file and not tokenizer:
        kwargs["gguf_file"] = gguf_file
    loaded = transformers.AutoTokenizer.from_pretrained(name, **kwargs)
    if not max_length:
        try:
            config = transformers.AutoConfig.from_pretrained(pretrained or name, **kwargs)
        except (OSError, ValueError):
            config = None
        max_length = resolve_max_length(config, loaded)
    return TokenCounter(loaded, int(max_length), add_bos_token)
