"""A served model that gives no prompt log-probabilities is refused before anything is
scored: lm-eval's real ``local-completions`` client against made-up OpenAI-style
servers on 127.0.0.1 that answer the way broken servers do (no ``logprobs``, ``echo``
ignored, every value 0, every token the same). The honest case, a real ``vllm serve``,
is in tests/test_vllm.py.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from helpers import assert_one_line_error, run_dcpmi, tiny_model

from lm_eval_dcpmi.errors import DCPMIConfigError


def _logprobs(tokens: list[int], mode: str) -> dict | None:
    """The ``logprobs`` of one completion choice of a prompt of ``tokens``, by ``mode``."""
    n = len(tokens) + 1  # echo: the prompt's tokens, then the one generated token
    if mode == "no-logprobs":
        return None
    if mode == "no-echo":  # only the generated token, as a server that ignores echo
        return {"tokens": ["x"], "token_logprobs": [-0.5], "top_logprobs": [{"x": -0.5}]}
    if mode == "zeros":
        values = [0.0] * n
    elif mode == "equal":
        values = [-1.0] * n
    else:  # "honest": made-up values, different per token
        values = [-0.1 * (1 + (t * 7919) % 13) for t in [*tokens, 0]]
    if mode == "one-more":  # a value before the prompt's: every value one place off
        values = [-0.7, *values]
    values[0] = None  # the first token has no log-probability, as OpenAI's API says
    top = [None] + [{f"t{i}": v} for i, v in enumerate(values[1:])]
    # "tokens-off": the right log-probabilities beside one token too many
    names = [f"t{i}" for i in range(len(values) + (mode == "tokens-off"))]
    return {"tokens": names, "token_logprobs": values, "top_logprobs": top}


class FakeServer:
    """An OpenAI-style ``/v1/completions`` endpoint on 127.0.0.1 answering as ``mode``
    says; ``prompts`` counts the prompts it was sent."""

    def __init__(self, mode: str) -> None:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                prompts = body["prompt"]
                if prompts and isinstance(prompts[0], int):
                    prompts = [prompts]
                server.prompts += len(prompts)
                choices = [
                    {"index": i, "text": "x", "logprobs": _logprobs(p, mode)}
                    for i, p in enumerate(prompts)
                ]
                data = json.dumps({"id": "fake", "object": "text_completion", "choices": choices})
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(data.encode())

            def log_message(self, *args) -> None:
                pass

        self.prompts = 0
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1/completions"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> FakeServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture(scope="module")
def tokenizer_folder(tmp_path_factory) -> str:
    """A folder with the embedded tokenizer (and a tiny model): the client tokenizes."""
    return str(tiny_model(tmp_path_factory.mktemp("served"), "llama"))


@pytest.fixture(scope="module")
def served_tasks():
    """The plugin's tasks, with no model in the metadata (as a served model's run has),
    indexed once for the module (~10 s each time)."""
    from lm_eval.tasks import TaskManager

    from lm_eval_dcpmi import task_configs_dir

    return TaskManager(include_path=str(task_configs_dir()))


def _model_args(folder: str, url: str) -> str:
    return f"model={folder},tokenizer={folder},base_url={url},num_concurrent=1,max_retries=1"


REFUSED = {
    "no-logprobs": "its answers to test requests hold no prompt log-probabilities (TypeError",
    "no-echo": "every prompt log-probability of test requests is 0: it ignores echo=True",
    "zeros": "every prompt log-probability of test requests is 0",
    "equal": "it gives every token of test requests the same log-probability",
    # one value more than the prompt's tokens: lm-eval would read each one place off (the
    # longest prompt is answered first: 'The capital of France is a large city', 9 tokens)
    "one-more": "its answer to a test prompt of 9 tokens holds 11 token_logprobs, not 10 (the "
    "prompt's, echoed, and the one generated token), so every log-probability would be read "
    "1 place(s) off",
    "tokens-off": "its answer to a test prompt of 9 tokens holds 11 tokens, not 10",
}


@pytest.mark.usefixtures("data_dir")
@pytest.mark.parametrize("mode", REFUSED)
def test_a_server_without_prompt_logprobs_is_refused_before_scoring(
    tokenizer_folder, served_tasks, mode
):
    import lm_eval

    with FakeServer(mode) as server, pytest.raises(DCPMIConfigError) as refused:
        lm_eval.simple_evaluate(
            model="local-completions",
            model_args=_model_args(tokenizer_folder, server.url),
            tasks=["dcpmi_copa"],
            limit=2,
            task_manager=served_tasks,
        )
    message = str(refused.value)
    assert message.startswith(f"the server LocalCompletionsAPI at {server.url} (model ")
    assert REFUSED[mode] in message and "Nothing was scored" in message
    # The probe's requests (the first fails the parser at once), none of the task's.
    assert server.prompts == (1 if mode == "no-logprobs" else 4)


@pytest.mark.usefixtures("data_dir")
def test_an_honest_server_passes_the_probe_and_is_scored(tokenizer_folder, served_tasks):
    import lm_eval

    with FakeServer("honest") as server:
        out = lm_eval.simple_evaluate(
            model="local-completions",
            model_args=_model_args(tokenizer_folder, server.url),
            tasks=["dcpmi_copa"],
            limit=2,
            task_manager=served_tasks,
        )
    assert server.prompts == 4 + 2 * 2 * 2  # the probe, then 2 documents x 2 options x 2
    assert out["results"]["dcpmi_copa"]["acc_dcpmi,none"] in (0.0, 0.5, 1.0)


@pytest.mark.slow
@pytest.mark.usefixtures("data_dir")
def test_the_command_line_refusal_is_one_line_and_writes_nothing(tokenizer_folder, tmp_path):
    out = tmp_path / "out"
    with FakeServer("no-echo") as server:
        completed = run_dcpmi(
            [
                "--model", "local-completions",
                "--model_args", _model_args(tokenizer_folder, server.url),
                "--tasks", "dcpmi_copa", "--quick", "2", "--output_path", str(out),
            ]
        )  # fmt: skip
    assert_one_line_error(completed, f"the server LocalCompletionsAPI at {server.url}", "echo")
    assert not out.exists() or not any(out.rglob("*.json"))
