"""Token counting takes the model's own tokenizer when one is loaded (no second load)."""

from __future__ import annotations

import pytest

from lm_eval_dcpmi.task import _tokens as tokens


@pytest.fixture
def no_loading(monkeypatch):
    """Fails the test if transformers is asked to load a tokenizer or config."""
    import transformers

    def refuse(*args, **kwargs):
        raise AssertionError(f"loaded again: {args} {kwargs}")

    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", refuse)
    monkeypatch.setattr(transformers.AutoConfig, "from_pretrained", refuse)
    monkeypatch.setattr(tokens, "_LOADED", {})
    tokens.token_counter_for.cache_clear()
    yield
    tokens.token_counter_for.cache_clear()


def test_a_shared_model_tokenizer_is_counted_with_and_its_window_kept(hf_lm, no_loading):
    args = {"pretrained": "some/model", "gguf_file": "m.gguf", "trust_remote_code": "False"}
    tokens.share_tokenizer(args, hf_lm.tokenizer, 2048)
    counter = tokens.counter_for_metadata({**args, "batch_size": 8})  # other args ignored
    assert counter.tokenizer is hf_lm.tokenizer and counter.max_length == 2048
    assert counter.split("The sun", " was rising.") == (2, 3)
    # A window given in the model arguments wins, as it does for the model.
    assert tokens.counter_for_metadata({**args, "max_length": 100}).max_length == 100
    # Same arguments written differently (a boolean as text) are the same tokenizer.
    assert tokens.shared_tokenizer({**args, "trust_remote_code": False}) is hf_lm.tokenizer
    # Other arguments: another tokenizer, which would have to be loaded.
    assert tokens.shared_tokenizer({**args, "revision": "v2"}) is None
    with pytest.raises(tokens.DCPMIConfigError, match="loaded again"):
        tokens.counter_for_metadata({**args, "revision": "v2"})


def test_prefix_lm_takes_a_tokenizer_already_loaded_for_its_arguments(hf_lm, monkeypatch):
    """``hf-prefix`` built after the tasks (``dcpmi run``) takes the tokenizer they loaded,
    and shares its own when it comes first (``lm_eval``): one load either way."""
    from lm_eval.models import huggingface

    from lm_eval_dcpmi.hf_prefix._lm import PrefixHFLM

    monkeypatch.setattr(tokens, "_LOADED", {})
    seen = {}
    original = huggingface.HFLM.__init__

    def spy(self, *args, **kwargs):
        seen["tokenizer"] = kwargs.get("tokenizer")
        kwargs["pretrained"] = hf_lm.model  # the session's weights: no second model load
        original(self, *args, **kwargs)

    monkeypatch.setattr(huggingface.HFLM, "__init__", spy)
    args = {"pretrained": "made/up", "gguf_file": "x.gguf"}
    tokens.share_tokenizer(args, hf_lm.tokenizer, None)
    lm = PrefixHFLM(**args, device="cpu", batch_size=2)
    assert seen["tokenizer"] is hf_lm.tokenizer and lm.tokenizer is hf_lm.tokenizer
    # ... and shares it back with its window.
    assert tokens._LOADED[tokens._tokenizer_key(args)] == (hf_lm.tokenizer, lm.max_length)
