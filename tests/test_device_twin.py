"""``benchmarks/device_check.sh`` as the GPU machine runs it, in a CPU twin of that machine.

The twin (``scripts/setup-device-twin.sh``) is the GPU image's Python 3.12 with its torch
2.11.0, transformers 5.17.0, accelerate 1.15.0, psutil, safetensors, tokenizers and numpy,
and no lm-eval. The test does what a developer does before a GPU call, and what the call does:

* ``benchmarks/device_prepare.sh`` here (PyPI and git): the wheels, the tokenizer and
  ``COMMIT`` in ``benchmarks/device/``;
* what a call sends, laid out in a fresh folder: the checkout's tracked and untracked files
  that git does not ignore, and the carried ``benchmarks/device``, nothing else (no
  ``.git``, no ``.venv``), within the 64 MiB a call carries;
* there, the one line docs/performance.md gives for the GPU machine (the same as
  device_check.sh's header), with ``--tiny``, under ``bash -c`` in a bare environment:
  ``python3`` the twin's, no ``git`` on the PATH, ``$OUT`` an empty folder;
* the record under ``$OUT``: the versions the twin holds, lm-eval from the carried wheel, the
  commit from ``COMMIT``, ``--batch_size auto``'s choice, and hf-prefix as exact as hf.

It runs only where ``DCPMI_DEVICE_TWIN`` names the twin (``scripts/test.sh``'s own step for
it, after ``scripts/setup-device-twin.sh``); elsewhere it is skipped with that reason.
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from helpers import ROOT

TWIN = os.environ.get("DCPMI_DEVICE_TWIN")
CARRIED = "benchmarks/device"  # the one ignored path the call carries
CARRY_LIMIT = 64 * 2**20  # a call's working tree, carried paths included
RETURNED = re.compile(r"[A-Za-z0-9._-]+")  # the names of files that come back from $OUT
DOCS = ROOT / "docs" / "performance.md"
SCRIPT = ROOT / "benchmarks" / "device_check.sh"


def gpu_line() -> str:
    """The one command line docs/performance.md gives for the GPU machine, which
    device_check.sh's header repeats."""
    command = re.compile(r"(bash )?(\./)?benchmarks/device_check\.sh( .*)?")
    lines = [
        line.strip()
        for line in DOCS.read_text(encoding="utf-8").splitlines()
        if command.fullmatch(line.strip())
    ]
    assert len(lines) == 1, f"{DOCS}: one command line for the GPU machine, not {lines}"
    header = SCRIPT.read_text(encoding="utf-8").split("\nset -euo pipefail")[0]
    assert f"#   {lines[0]}\n" in header, f"{SCRIPT}'s header does not give {lines[0]!r}"
    return lines[0]


@pytest.mark.fast
def test_the_gpu_line_is_one_line_the_docs_and_the_script_agree_on():
    line = gpu_line()
    argv = shlex.split(line)
    assert argv[:2] == ["bash", "benchmarks/device_check.sh"]
    assert argv[argv.index("--out") + 1] == "$OUT"  # shlex keeps the variable for the shell


@pytest.fixture(scope="module")
def twin() -> Path:
    if not TWIN:
        pytest.skip(
            "DCPMI_DEVICE_TWIN is unset: scripts/test.sh runs this test in its own step, in the "
            "environment scripts/setup-device-twin.sh makes"
        )
    python = Path(TWIN).resolve() / "bin" / "python3"
    if not python.exists():
        pytest.fail(
            f"DCPMI_DEVICE_TWIN={TWIN}: no bin/python3 in it; make it with "
            "scripts/setup-device-twin.sh"
        )
    return python.parent


def send(machine: Path) -> int:
    """Copy what a call sends into ``machine``; its size in bytes."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT, capture_output=True, check=True,
    ).stdout.decode()  # fmt: skip
    names = [name for name in listed.split("\0") if name and (ROOT / name).is_file()]
    names += [p.relative_to(ROOT).as_posix() for p in (ROOT / CARRIED).rglob("*") if p.is_file()]
    names = list(dict.fromkeys(names))  # the folder's tracked README is in both
    for name in names:
        (machine / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, machine / name)  # modes too: the scripts stay executable
    return sum((machine / name).stat().st_size for name in names)


def path_without_git(folder: Path, twin_bin: Path) -> str:
    """A PATH of the twin's bin and links to the system's programs, git's left out: the
    GPU machine may have no git."""
    folder.mkdir()
    for system in (Path("/usr/bin"), Path("/bin")):
        for program in system.iterdir():
            link = folder / program.name
            if not program.name.startswith("git") and not link.exists():
                link.symlink_to(program)
    path = f"{twin_bin}:{folder}"
    assert shutil.which("git", path=path) is None
    assert shutil.which("python3", path=path) == str(twin_bin / "python3")
    return path


def files_in(folder: Path) -> set[str]:
    return {
        p.relative_to(folder).as_posix()
        for p in folder.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }


@pytest.mark.device_twin
@pytest.mark.slow
def test_the_gpu_line_runs_in_the_images_twin_and_records_under_out(twin, tmp_path):
    line = gpu_line()
    prepared = subprocess.run(
        ["benchmarks/device_prepare.sh"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert prepared.returncode == 0, prepared.stderr[-3000:]
    print(prepared.stdout.strip().splitlines()[-1])  # what travels, in MiB
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                          capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    commit = (ROOT / CARRIED / "COMMIT").read_text(encoding="utf-8").strip()
    assert commit.removesuffix("+changes") == head

    machine = tmp_path / "machine"
    size = send(machine)
    assert size <= CARRY_LIMIT, f"{size / 2**20:.1f} MiB travel, over the 64 MiB a call carries"
    sent = files_in(machine)
    out = tmp_path / "OUT"
    out.mkdir()
    (tmp_path / "tmp").mkdir()
    (tmp_path / "home").mkdir()
    bare = {  # the machine's environment: nothing of this one's (no VIRTUAL_ENV, PYTHONPATH)
        "PATH": path_without_git(tmp_path / "bin", twin),
        "HOME": str(tmp_path / "home"),
        "TMPDIR": str(tmp_path / "tmp"),
        "LANG": "C.UTF-8",
        "OUT": str(out),
    }
    started = time.perf_counter()
    done = subprocess.run(["bash", "-c", f"{line} --tiny"], cwd=machine, env=bare,
                          capture_output=True, text=True, timeout=900, check=False)  # fmt: skip
    took = time.perf_counter() - started
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    print(f"device_check --tiny in the twin: {took:.0f} s")

    # What comes back: a few files at $OUT's top, with names that may come back.
    back = files_in(out)
    assert back == {"sizes_tiny.json", "sizes_tiny.md", "device_check.log"}
    assert all(RETURNED.fullmatch(name) for name in back)
    # Nothing written into the tree but Python's caches, nothing installed into the twin.
    assert files_in(machine) == sent
    lm_eval = subprocess.run([str(twin / "python3"), "-c", "import lm_eval"], env=bare,
                             capture_output=True, check=False)  # fmt: skip
    assert lm_eval.returncode != 0, "the twin holds lm-eval: the carried wheel went untested"
    (site,) = (tmp_path / "tmp").glob("dcpmi-device-site.*")
    (wheel,) = (machine / CARRIED / "wheels").glob("lm_eval-*.whl")
    assert (site / "lm_eval").is_dir()

    report = json.loads((out / "sizes_tiny.json").read_text(encoding="utf-8"))
    host = report["machine"]
    assert host["commit"] == commit and host["commit_from"] == "benchmarks/device/COMMIT"
    assert host["python"].startswith("3.12.")
    versions = host["versions"]
    assert versions["torch"].startswith("2.11.0") and versions["transformers"] == "5.17.0"
    assert versions["lm_eval"] == wheel.name.split("-")[1]  # the carried wheel's
    assert versions["lm-eval-dcpmi"] == "checkout"  # the plugin from the tree
    assert "gpu" not in host  # the twin's torch sees no GPU

    (row,) = report["configs"]
    assert row["config"] == "tiny-llama" and row["dtype"] == "bfloat16"
    assert row["device"] == "cpu" and row["batch_size"] == "auto"
    hf, prefix = row["backends"]["hf"], row["backends"]["hf-prefix"]
    for backend in (hf, prefix):
        # auto's choice, within the cap --tiny gives it (--max-batch-size 2)
        assert backend["batch_size_auto"] and all(1 <= b <= 2 for b in backend["batch_size_auto"])
        assert backend["tokens_per_s"] > 0 and 0 < backend["efficiency"]
        assert backend["batch_size_auto_s"] > 0  # timed apart from the scoring
        assert "parent_gpu_memory_gb" not in backend  # only on a GPU
    assert prefix["setup"] == {"packed": True, "window_masks": True, "window": None}
    assert prefix["cache_budget_mb"] > 0
    same = row["hf_prefix_vs_hf"]
    # bf16 totals summed as HFLM sums them: within one bf16 rounding, the same picks.
    assert math.isfinite(same["max_abs_diff"]) and same["max_abs_diff"] <= 0.0625
    assert same["picks_equal"] and same["documents_differing"] == []
    assert prefix["forwarded_positions"] < hf["hf_positions"] <= hf["forwarded_positions"]
    for backend in ("hf", "hf-prefix"):  # bf16 against the same weights in fp32
        assert math.isfinite(row["vs_fp32"][backend]["max_abs_diff"])
    page = (out / "sizes_tiny.md").read_text(encoding="utf-8")
    assert page.count("tiny-llama") == 2 and f"commit {commit}" in page
    log = (out / "device_check.log").read_text(encoding="utf-8")
    assert re.search(r"^device_check: done in \d+ s", log, re.M)
