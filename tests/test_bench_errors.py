"""The benchmarks' one rule for errors (``benchmarks/common.py``: ``Parser``, ``Refused``,
``run_main``): an option or a record they cannot run with ends the run in one line on stderr
naming it and how to put it right, exit status 2, no traceback, before any model or data
loads. Each case runs the script as a user would; without a GPU everywhere
(``CUDA_VISIBLE_DEVICES`` empty), so that a GPU machine refuses as this one does."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from helpers import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
import published_configs  # noqa: E402
from common import Refused  # noqa: E402

# Every test here needs neither the model nor the data: the fast tier.
pytestmark = pytest.mark.fast


def refused(command: list[str], **env: str) -> str:
    """Run ``command`` from the project root; its one line of error (checked: exit status
    2, one line on stderr, no traceback)."""
    done = subprocess.run(
        command,
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        env={**os.environ, "CUDA_VISIBLE_DEVICES": "", **env},
    )
    said = done.stdout + done.stderr
    assert done.returncode == 2, said
    assert "Traceback" not in said
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


def bench_sizes(*args: str) -> str:
    return refused([sys.executable, "benchmarks/bench_sizes.py", *args])


def bench_suite(*args: str) -> str:
    return refused([sys.executable, "benchmarks/bench_suite.py", *args])


def test_a_tokenizer_folder_not_there_is_refused():
    line = bench_sizes("--tokenizer", "/no/such/folder")
    assert line.startswith("bench_sizes.py: error: argument --tokenizer: /no/such/folder: ")
    assert "no such folder" in line and "leave --tokenizer out" in line


def test_a_folder_without_a_tokenizer_is_refused(tmp_path):
    line = bench_sizes("--tokenizer", str(tmp_path))
    assert f"argument --tokenizer: {tmp_path}: no tokenizer_config.json" in line


def test_a_tokenizer_transformers_cannot_load_is_refused_naming_the_option(tmp_path):
    (tmp_path / "tokenizer_config.json").write_text("{}")
    with pytest.raises(Refused, match=rf"^--tokenizer {tmp_path}: transformers cannot load it"):
        published_configs.load_tokenizer(str(tmp_path))


@pytest.mark.parametrize("device", ["cuda", "cuda:1"])
def test_cuda_without_a_gpu_is_refused(device):
    line = bench_sizes("--device", device)
    assert f"argument --device: {device}: torch sees no CUDA device" in line
    assert "--device cpu" in line


def test_a_device_neither_cpu_nor_cuda_is_refused():
    assert "argument --device: 'tpu': cpu, cuda or cuda:N" in bench_sizes("--device", "tpu")


def test_no_documents_to_score_is_refused():
    line = bench_sizes("--race", "0", "--hellaswag", "0")
    assert "--race 0 --hellaswag 0: no documents to score" in line


def test_a_negative_count_of_documents_is_refused():
    assert "argument --race: '-1': a whole number, 0 or more" in bench_sizes("--race", "-1")


@pytest.mark.parametrize(
    ("text", "why"),
    [('{"machine": {}, "configs": [{"con', "not valid JSON"), ("[]", "not a bench_sizes record")],
)
def test_a_record_to_resume_that_is_not_one_is_refused_naming_it(tmp_path, text, why):
    record = tmp_path / "sizes_x.json"
    record.write_text(text)
    line = bench_sizes("--label", "x", "--out", str(tmp_path))
    assert line.startswith(f"bench_sizes.py: error: {record}: {why}")
    assert "pass another --label" in line
    assert record.read_text() == text  # left as it was


def test_the_device_check_without_a_gpu_says_one_is_needed(tmp_path):
    line = refused(
        ["benchmarks/device_check.sh", "--out", str(tmp_path)], DCPMI_PYTHON=sys.executable
    )
    assert line.startswith("device_check: this check needs a GPU") and "--tiny" in line
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("part", ["x", "2/1", "1/2/3"])
def test_a_part_that_is_not_k_of_n_is_refused(part):
    assert f"argument --part: '{part}': K/N with 1 <= K <= N" in bench_suite("--part", part)


def test_a_summary_folder_not_there_is_refused():
    line = bench_suite("--summary", "/no/such/folder")
    assert "--summary /no/such/folder: no such folder" in line


def test_a_cut_record_in_the_summary_folder_is_refused_naming_it(tmp_path):
    (tmp_path / "dcpmi_copa.json").write_text('{"task": ')
    line = bench_suite("--summary", str(tmp_path))
    assert line.startswith(f"bench_suite.py: error: {tmp_path / 'dcpmi_copa.json'}: not valid JSON")
    assert not (tmp_path / "suite.json").exists()


def test_an_unknown_option_is_one_line_too():
    line = bench_sizes("--bogus")
    assert line == "bench_sizes.py: error: unrecognized arguments: --bogus (see --help)"


def test_every_benchmark_script_errs_by_the_one_rule():
    """Each script's parser is ``common.Parser`` and its main runs under ``run_main``."""
    for path in sorted((ROOT / "benchmarks").glob("*.py")):
        text = path.read_text(encoding="utf-8")
        if "def main(" in text:
            assert "Parser(__doc__)" in text and "run_main(main)" in text, path.name
            assert "argparse.ArgumentParser(" not in text, path.name
