"""scripts/score_parts.py: shards that survive a session, one mechanism with `dcpmi merge`,
and a child that stops with it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import ROOT

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("data_dir")]

SCRIPT = ROOT / "scripts" / "score_parts.py"


def children_with(text: str) -> list[int]:
    """Processes whose command line holds ``text`` (read from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if text in command:
                found.append(int(entry.name))
    return found


def test_sigterm_stops_the_running_shard_and_leaves_nothing(tmp_path):
    folder = tmp_path / "shards"
    mark = f"--output_path {folder}/shard-1-of-2.running"
    process = subprocess.Popen(
        [
            sys.executable,
            str(SCRIPT),
            "--tasks",
            "dcpmi_hellaswag",
            "--shards",
            "2",
            "--folder",
            str(folder),
            "--",
            "--model",
            "dummy",
        ],  # fmt: skip
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    while not children_with(mark) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert children_with(mark), "the shard's dcpmi run never started"
    time.sleep(1)  # into its checks (HellaSwag's 10,042 documents)
    process.send_signal(signal.SIGTERM)
    _out, err = process.communicate(timeout=120)
    assert process.returncode == 143, err[-2000:]
    assert not children_with(mark)  # the child stopped with it
    assert err.rstrip().splitlines()[-1] == (
        f"score_parts: stopped by SIGTERM; {folder}/shard-1-of-2.running removed."
    )
    assert list(folder.iterdir()) == []


def test_shards_already_there_are_skipped(tmp_path):
    folder = tmp_path / "shards"
    (folder / "shard-1-of-2").mkdir(parents=True)
    (folder / "shard-2-of-2").mkdir()
    done = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--tasks",
            "dcpmi_cb",
            "--shards",
            "2",
            "--folder",
            str(folder),
            "--no-merge",
        ],  # fmt: skip
        capture_output=True,
        text=True,
        env={**os.environ},
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "score_parts: 2 of 2 shards there; scoring []" in done.stdout
