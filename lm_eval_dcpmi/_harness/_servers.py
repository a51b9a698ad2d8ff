"""A served model's prompt log-probabilities, checked before a DC-PMI task is scored.

lm-eval's API backends (``local-completions``, ``openai-completions``, ...) read each
request's loglikelihood off the server's log-probabilities of the prompt's own tokens
(``echo=True`` with ``logprobs``). A server that ignores ``echo`` or returns no such
log-probabilities gives zeros, or numbers that are not log-probabilities at all, and a
multiple-choice run then reports chance-level accuracies without a word (llama.cpp's
server did, lm-eval's issues say). So before ``evaluate`` scores a DC-PMI task through
such a backend, a few made-up requests are scored; a server whose answers cannot be
prompt log-probabilities is refused in one line (``DCPMIConfigError``), before any
result is written: values all 0, positive, not finite or the same for every token, and
answers whose log-probabilities (or tokens, where returned) are not one per token of the
prompt sent plus the generated one, which would put every value places off.
"""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Callable, Iterator
from typing import Any

from lm_eval_dcpmi.errors import DCPMIConfigError

# Made-up requests: one context under three continuations, and one more context. A real
# model gives each a negative log-probability, different ones per token.
PROBE = (
    ("The capital of France is", " Paris"),
    ("The capital of France is", " a large city"),
    ("The capital of France is", " 42"),
    ("One, two, three,", " four, five"),
)


def api_model(lm: Any) -> Any | None:
    """The lm-eval API model (``TemplateAPI``) behind ``lm`` (``--use_cache`` wraps it in a
    ``CachingLM``), or None for any other model."""
    from lm_eval.models.api_models import TemplateAPI

    for candidate in (lm, getattr(lm, "lm", None)):
        if isinstance(candidate, TemplateAPI):
            return candidate
    return None


def _tasks(task_dict: Any) -> Iterator[Any]:
    """Every task of lm-eval's (nested) task dict."""
    for value in (task_dict or {}).values():
        if isinstance(value, dict):
            yield from _tasks(value)
        else:
            yield value


def check_prompt_logprobs(api: Any) -> None:
    """Score ``PROBE`` through ``api``; raise ``DCPMIConfigError`` naming the server and
    what its answers lack when they cannot be prompt log-probabilities."""
    from lm_eval.api.instance import Instance
    from lm_eval.api.model import CacheHook

    where = f"{type(api).__name__} at {getattr(api, 'base_url', None) or '(no base_url)'}"
    model = getattr(api, "model", None)
    server = f"the server {where}" + (f" (model {model})" if model else "")
    requests = [Instance("loglikelihood", {}, pair, i) for i, pair in enumerate(PROBE)]
    hook = api.cache_hook
    api.cache_hook = CacheHook(None)  # the probe's answers stay out of --use_cache's store
    answered: list[tuple[Any, Any]] = []  # (the server's answer, the prompts' tokens)
    parse = api.parse_logprobs

    def keeping(outputs: Any, tokens: Any = None, ctxlens: Any = None, **kwargs: Any) -> Any:
        answered.append((outputs, tokens))
        return parse(outputs=outputs, tokens=tokens, ctxlens=ctxlens, **kwargs)

    api.parse_logprobs = keeping  # lm-eval calls self.parse_logprobs: this probe's only
    try:
        answers = api.loglikelihood(requests, disable_tqdm=True)
        values = [float(value) for value, _greedy in answers]
    except DCPMIConfigError:
        raise
    except Exception as err:  # whatever lm-eval's parser raises on a malformed answer
        missing = (
            "its answers to test requests hold no prompt log-probabilities "
            f"({type(err).__name__}: {err})"
        )
        raise DCPMIConfigError(_refusal(server, missing)) from err
    finally:
        api.cache_hook = hook
        del api.parse_logprobs
    tokens = [_token_count(api, cont) for _, cont in PROBE]
    problem = _degenerate(values, tokens) or _misaligned(answered)
    if problem is not None:
        raise DCPMIConfigError(_refusal(server, problem))


def _misaligned(answered: list[tuple[Any, Any]]) -> str | None:
    """Where an answer's prompt log-probabilities (and tokens, where the server returns
    them) are not one per token of the prompt sent plus the one generated token: lm-eval
    reads the continuation's as ``token_logprobs[ctxlen:-1]``, so any other count shifts
    every value. Answers not in the OpenAI completions shape are left to the parser."""
    for outputs, prompts in answered:
        for output in outputs if isinstance(outputs, list) else [outputs]:
            choices = output.get("choices") if isinstance(output, dict) else None
            if not isinstance(choices, list) or not isinstance(prompts, list):
                continue
            ordered = sorted(choices, key=lambda c: c.get("index", 0) if isinstance(c, dict) else 0)
            for choice, prompt in zip(ordered, prompts, strict=False):
                logprobs = choice.get("logprobs") if isinstance(choice, dict) else None
                if not isinstance(logprobs, dict) or not isinstance(prompt, list):
                    continue
                expected = len(prompt) + 1
                for key in ("token_logprobs", "tokens"):
                    found = logprobs.get(key)
                    if isinstance(found, list) and len(found) != expected:
                        return (
                            f"its answer to a test prompt of {len(prompt)} tokens holds "
                            f"{len(found)} {key}, not {expected} (the prompt's, echoed, and "
                            "the one generated token), so every log-probability would be read "
                            f"{abs(len(found) - expected)} place(s) off"
                        )
    return None


def _degenerate(values: list[float], tokens: list[int]) -> str | None:
    """What makes these loglikelihoods of ``PROBE`` impossible as prompt log-probabilities
    (``tokens``: each continuation's token count), or None."""
    shown = ", ".join(f"{v:.4g}" for v in values)
    if not all(math.isfinite(v) for v in values):
        return f"it returned non-finite log-probabilities for test requests ({shown})"
    if all(v == 0 for v in values):
        return (
            "every prompt log-probability of test requests is 0: it ignores echo=True or "
            "returns log-probabilities of generated tokens only"
        )
    if any(v > 0 for v in values):
        return f"it returned positive log-probabilities for test requests ({shown})"
    per_token = [v / max(1, n) for v, n in zip(values, tokens, strict=True)]
    if max(per_token) - min(per_token) <= 1e-9 * max(1.0, abs(per_token[0])):
        return f"it gives every token of test requests the same log-probability ({shown})"
    return None


def _token_count(api: Any, text: str) -> int:
    try:
        return len(api.tok_encode(text))
    except Exception:  # no tokenizer: the per-token check then reads whole continuations
        return 1


def _refusal(server: str, missing: str) -> str:
    return (
        f"{server}: {missing}. DC-PMI reads each option's loglikelihood off the server's "
        "log-probabilities of the prompt (echo=True with logprobs, as `vllm serve` returns "
        "them); with these every accuracy would be chance. Nothing was scored; use a server "
        "that returns prompt log-probabilities, or run the model with --model hf or vllm."
    )


def check_servers_before_evaluate(
    evaluator: Any, is_dcpmi_task: Callable[[Any], bool], enabled: Callable[[], bool]
) -> None:
    """Wrap ``evaluator.evaluate`` (once): while ``enabled()``, a run of an API model with
    a task that ``is_dcpmi_task`` first checks the server (``check_prompt_logprobs``).

    0.4.12, 0.4.13 and 0.5.0.dev1: ``evaluate(lm, task_dict, ...)``, called by
    ``simple_evaluate`` by its module-level name (``lm_eval/evaluator.py``).
    """
    original = evaluator.evaluate
    if getattr(original, "_dcpmi_patched", False):
        return
    signature = inspect.signature(original)

    @functools.wraps(original)
    def evaluate(*args: Any, **kwargs: Any) -> Any:
        if enabled():
            try:
                given = signature.bind(*args, **kwargs).arguments
            except TypeError:  # lm-eval's own error, as without the plugin
                return original(*args, **kwargs)
            api = api_model(given.get("lm"))
            if api is not None and any(is_dcpmi_task(t) for t in _tasks(given.get("task_dict"))):
                check_prompt_logprobs(api)
        return original(*args, **kwargs)

    evaluate._dcpmi_patched = True  # type: ignore[attr-defined]
    evaluator.evaluate = evaluate
