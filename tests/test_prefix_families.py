"""``hf-prefix`` on the model families people run, each scoring every request as ``hf``.

The models are random-weight ones that ``helpers.tiny_model`` builds from transformers'
config of each architecture (2 layers of 64, the embedded tokenizer, no download): the
real attention, position and cache code of each family, in seconds. The requests are
real ones (COPA, a RACE-H article, generic pairs); the sliding-window families get a
window of 16 tokens, shorter than most of them.
"""

from __future__ import annotations

import logging

import pytest
import torch
from helpers import (
    ForwardTokens,
    assert_same,
    generic_pairs,
    instances,
    load_task,
    request_pairs,
    tiny_model,
)

WINDOW = 16
# model type -> the config settings it needs beside tiny_model's (2 layers of 64)
FAMILIES = {
    "llama": {},
    "qwen2": {},
    "qwen3": {"head_dim": 16},
    "mistral": {"sliding_window": WINDOW},  # every layer slides
    # sliding and full layers mixed, as Gemma 2 and 3 have them
    "gemma3_text": {
        "sliding_window": WINDOW,
        "layer_types": ["sliding_attention", "full_attention"],
        "head_dim": 16,
    },
    "phi3": {},
    "gpt2": {},
    "gpt_neox": {},
    "opt": {"word_embed_proj_dim": 64, "ffn_dim": 128},
}
SLIDING = {
    "mistral": ("sliding_attention",),
    "gemma3_text": ("sliding_attention", "full_attention"),
}


@pytest.fixture(scope="module")
def pairs(task_manager) -> list[tuple[str, str]]:
    """COPA's first 2 documents, the shortest RACE-H article of the first 40 questions
    (each of its 8 requests some 300 tokens), and lm-eval-style generic pairs."""
    race = request_pairs(load_task(task_manager, "dcpmi_race_h"), 40)
    shortest = min(race, key=lambda doc: len(doc[0][0]))
    copa = request_pairs(load_task(task_manager, "dcpmi_copa"), 2)
    return [*shortest, *(pair for doc in copa for pair in doc), *generic_pairs()]


def tokens(lm, context: str, continuation: str) -> int:
    """The request's tokens as lm-eval splits it (an empty context: the prefix token)."""
    if not context:
        return 1 + len(lm.tok_encode(continuation, add_special_tokens=False))
    return sum(map(len, lm._encode_pair(context, continuation)))


def _models(tmp_path_factory, family: str, **kwargs):
    """(hf, hf-prefix) on one tiny model of ``family`` (one set of weights)."""
    from lm_eval.models.huggingface import HFLM

    from lm_eval_dcpmi.hf_prefix._lm import PrefixHFLM

    folder = tiny_model(tmp_path_factory.mktemp(family), family, **FAMILIES[family])
    hf = HFLM(pretrained=str(folder), device="cpu", batch_size=8, **kwargs)
    prefix = PrefixHFLM(
        pretrained=hf.model, tokenizer=hf.tokenizer, device="cpu", batch_size=8, **kwargs
    )
    return hf, prefix


@pytest.mark.parametrize("family", FAMILIES)
def test_each_family_scores_as_hf_and_shares_prefixes(tmp_path_factory, pairs, family):
    from lm_eval_dcpmi.hf_prefix._reduced import attention_layout, reduced_copy

    hf, prefix = _models(tmp_path_factory, family)
    setup = prefix._setup
    assert setup is not None and setup.packed, f"{family}: the self-check refused the model"
    # The self-check ran on a reduced copy of the family's own class and layout.
    reduced = reduced_copy(prefix.model, prefix.device)
    assert reduced is not None and type(reduced.fp32) is type(prefix.model)
    assert attention_layout(reduced.fp32.config)[0] == setup.kinds
    assert setup.kinds == SLIDING.get(family, ("full_attention",))
    assert setup.window == (WINDOW if family in SLIDING else None) and setup.window_masks
    with ForwardTokens(hf.model) as hf_count:
        expected = hf.loglikelihood(instances(pairs), disable_tqdm=True)
    with ForwardTokens(prefix.model) as prefix_count:
        got = prefix.loglikelihood(instances(pairs), disable_tqdm=True)
    assert_same(expected, got, [f"{family} {pair!r:.80}" for pair in pairs])
    # RACE's article goes through the model once, not once per option: far fewer tokens.
    assert 3 * prefix_count.tokens < hf_count.tokens, (prefix_count.tokens, hf_count.tokens)
    if family in SLIDING:  # RACE's 8 requests (and more) reach past the window
        assert sum(tokens(hf, *pair) - 1 > WINDOW for pair in pairs) >= 8


def test_without_window_masks_only_the_requests_past_the_window_go_to_hf(
    tmp_path_factory, pairs, monkeypatch, caplog
):
    """Masks that ignore the window (as a model whose sliding the masks cannot express)
    fail the self-check past the window; requests that fit in it still share prefixes,
    the longer ones go through hf's scoring, and the run says so once."""
    import dataclasses

    from lm_eval_dcpmi.hf_prefix import _masks as masks

    layer_masks = masks.layer_masks

    def full_attention(model, device, allowed, positions, key_positions, setup):
        setup = dataclasses.replace(setup, window_masks=False)
        return layer_masks(model, device, allowed, positions, key_positions, setup)

    monkeypatch.setattr(masks, "layer_masks", full_attention)
    with caplog.at_level(logging.WARNING, logger="lm_eval_dcpmi.hf_prefix._lm"):
        hf, prefix = _models(tmp_path_factory, "mistral")
        assert prefix._setup is not None and not prefix._setup.window_masks
        expected = hf.loglikelihood(instances(pairs), disable_tqdm=True)
        short = [pair for pair in pairs if tokens(hf, *pair) - 1 <= WINDOW]
        with ForwardTokens(hf.model) as hf_short:
            hf.loglikelihood(instances(short), disable_tqdm=True)
        with ForwardTokens(prefix.model) as prefix_short:
            prefix.loglikelihood(instances(short), disable_tqdm=True)  # none past the window
        got = prefix.loglikelihood(instances(pairs), disable_tqdm=True)
        prefix.loglikelihood(instances(pairs), disable_tqdm=True)
    assert_same(expected, got, [f"{pair!r:.80}" for pair in pairs])
    assert short and prefix_short.tokens < hf_short.tokens  # shared, where that is exact
    lines = [r.getMessage() for r in caplog.records if r.name == "lm_eval_dcpmi.hf_prefix._lm"]
    (start,) = [line for line in lines if "do not score as the model does" in line]
    assert "past the window: cached" in start and f"its window ({WINDOW} tokens)" in start
    past = sum(tokens(hf, *pair) - 1 > WINDOW for pair in pairs)
    (said,) = [line for line in lines if "longer than the model's sliding window" in line]
    assert said.startswith(f"hf-prefix: {past} of {len(pairs)} requests are longer")


def test_the_self_check_never_runs_the_model_itself(tmp_path_factory):
    """Its cost does not grow with the model: no forward call of the model itself, its
    budgets' sizes read from the config and confirmed on the reduced copy."""
    from lm_eval.models.huggingface import HFLM

    from lm_eval_dcpmi.hf_prefix._lm import PrefixHFLM
    from lm_eval_dcpmi.hf_prefix._reduced import kv_per_token

    folder = tiny_model(tmp_path_factory.mktemp("gemma"), "gemma3_text", **FAMILIES["gemma3_text"])
    hf = HFLM(pretrained=str(folder), device="cpu", batch_size=8)
    with ForwardTokens(hf.model) as count:
        prefix = PrefixHFLM(pretrained=hf.model, tokenizer=hf.tokenizer, device="cpu", batch_size=8)
    assert count.tokens == 0 and prefix._setup is not None and prefix._setup.packed
    # 2 layers, 2 key/value heads of 16, keys and values: what the model's cache holds.
    assert prefix._setup.kv_per_token == kv_per_token(hf.model.config) == 2 * 2 * 2 * 16
    assert prefix._setup.vocab == hf.model.config.vocab_size


def test_without_a_reduced_copy_the_model_itself_is_checked(tmp_path_factory, pairs, monkeypatch):
    """A config that does not rebuild at a toy size: the same checks on the model itself."""
    from lm_eval_dcpmi.hf_prefix import _check as check

    monkeypatch.setattr(check, "reduced_copy", lambda model, device: None)
    hf, prefix = _models(tmp_path_factory, "mistral")
    assert prefix._setup is not None and prefix._setup.packed and prefix._setup.window_masks
    assert_same(
        hf.loglikelihood(instances(pairs), disable_tqdm=True),
        prefix.loglikelihood(instances(pairs), disable_tqdm=True),
        [f"{pair!r:.80}" for pair in pairs],
    )


def test_in_bf16_hf_prefix_shares_prefixes_within_bf16s_rounding(tmp_path_factory, pairs):
    """bf16 rounds each token's log-probability (to 1/16 near -13), and HFLM sums them in
    bf16: hf-prefix passes its self-check there, sums as HFLM does (every answer a bf16
    number) and answers within ``tolerance`` of hf in bf16, request by request."""
    from lm_eval_dcpmi.hf_prefix._check import tolerance

    hf, prefix = _models(tmp_path_factory, "llama", dtype="bfloat16")
    assert prefix.model.dtype == torch.bfloat16 and prefix._setup.packed
    expected = hf.loglikelihood(instances(pairs), disable_tqdm=True)
    got = prefix.loglikelihood(instances(pairs), disable_tqdm=True)
    for (want, _), (value, _), pair in zip(expected, got, pairs, strict=True):
        assert abs(want - value) <= tolerance(torch.bfloat16, want), (pair, want, value)
        assert torch.tensor(value, dtype=torch.bfloat16).item() == value, (pair, value)


@pytest.mark.fast
def test_the_tolerance_is_fp32s_or_two_roundings_of_a_16_bit_log_probability():
    from lm_eval_dcpmi.hf_prefix._check import tolerance

    assert tolerance(torch.float32, -13.5) == 1e-3
    assert tolerance(torch.float64, -300.0) == 1e-3
    assert tolerance(torch.bfloat16, -13.5) == 2 * 2**-7 * 13.5  # 0.2109375
    assert tolerance(torch.float16, -13.5) == 2 * 2**-10 * 13.5
    assert tolerance(torch.bfloat16, -0.01) == 1e-3  # never under fp32's
