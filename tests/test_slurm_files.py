"""The job files of ``scripts/slurm/`` without a cluster: the docs show these very files, and
every variable a job file reads from the settings is one ``settings.sh`` sets.

``tests/test_slurm.py`` submits the same files to a real SLURM cluster.
"""

from __future__ import annotations

import re
import subprocess

import pytest
from helpers import ROOT

pytestmark = pytest.mark.fast

SLURM_DIR = ROOT / "scripts" / "slurm"
JOB_FILES = ("settings.sh", "submit.sh", "shard.sbatch", "merge.sbatch")
# `<!-- file:PATH -->`, then a fenced block holding that file
SHOWN = re.compile(r"<!-- file:(\S+) -->\n```\w*\n(.*?)```\n", re.S)


def shown_files() -> dict[str, list[tuple[str, str]]]:
    """Page -> [(file path, the block's text)] for every file a page shows."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    found = {}
    for page in pages:
        blocks = SHOWN.findall(page.read_text(encoding="utf-8"))
        if blocks:
            found[str(page.relative_to(ROOT))] = blocks
    return found


def test_the_docs_show_the_job_files_as_they_are():
    found = shown_files()
    harness = [path for path, _text in found.get("docs/harness.md", [])]
    assert harness == [f"scripts/slurm/{name}" for name in JOB_FILES]
    for page, blocks in found.items():
        for path, text in blocks:
            assert (ROOT / path).is_file(), f"{page} shows {path}, which is not there"
            assert text == (ROOT / path).read_text(encoding="utf-8"), (
                f"{page}: its copy of {path} differs from the file; paste the file again"
            )


def settings_variables() -> set[str]:
    """The variables sourcing settings.sh sets (bash itself reads the file, in an empty
    environment)."""

    def variables(script: str) -> set[str]:
        return set(
            subprocess.run(
                ["env", "-i", "bash", "--norc", "--noprofile", "-c", f"{script}compgen -v"],
                capture_output=True, text=True, check=True,
            ).stdout.split()
        )  # fmt: skip

    return variables(f"source {SLURM_DIR / 'settings.sh'}; ") - variables("")


def test_every_variable_the_job_files_read_is_set_in_settings():
    settings = settings_variables()
    assert {"SHARDS", "OUTPUT", "TASKS", "MODEL", "DCPMI"} <= settings
    assert {"DCPMI_DATA_DIR", "HF_HOME"} <= settings  # what the nodes share
    scheduler = re.compile(r"SLURM_\w+|DCPMI_SLURM_SETTINGS|OMP_NUM_THREADS")
    for name in JOB_FILES[1:]:
        text = (SLURM_DIR / name).read_text()
        subprocess.run(["bash", "-n", str(SLURM_DIR / name)], check=True)
        assigned = set(re.findall(r"(?:^|\s)(\w+)\+?=", text, re.M))
        assigned |= set(re.findall(r"\bfor (\w+) in", text))
        read = set(re.findall(r"\$\{?([A-Za-z_]\w*)", text)) - assigned
        unknown = {v for v in read if not scheduler.fullmatch(v)} - settings
        assert not unknown, f"{name} reads {sorted(unknown)}, which settings.sh does not set"
