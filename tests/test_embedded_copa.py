"""COPA's two files ship inside the package (BSD-2-Clause, licence beside them): they are
the upstream files byte for byte, and with no data folder set dcpmi_copa reads them, with
no download; a data folder that is set still wins."""

from __future__ import annotations

import hashlib
import logging
import re
import subprocess
import sys
import zipfile

import pytest
from helpers import ROOT, load_task, plugin_task_manager

from lm_eval_dcpmi.data import _loaders as data

# The upstream files' sha256 (COPA-resources.tgz, COPA-resources/datasets/). The shared data
# folder's README.md (../shared/data/README.md) lists the first 16 hex digits of each.
UPSTREAM_SHA256 = {
    "copa/copa-dev.xml": "6251d7d99de4cbc6a2c3323923213e5e73071d286039b97a0908736e2be093bc",
    "copa/copa-test.xml": "640824681bde78a7592726504d7d9bab294e5de26072d973307fa80d34919d92",
}
SHARED_README = ROOT.parent / "shared" / "data" / "README.md"


def sha256(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.fast
def test_the_packaged_files_are_the_upstream_files():
    assert set(data.PACKAGED) == set(UPSTREAM_SHA256)
    for file, digest in UPSTREAM_SHA256.items():
        assert sha256(data.packaged(file)) == digest, file


@pytest.mark.fast
def test_the_shared_readme_lists_the_same_sums():
    if not SHARED_README.is_file():
        pytest.skip(f"{SHARED_README} is not here")
    listed = dict(
        re.findall(r"`(copa/[\w-]+\.xml)` \| [^|]+\| ([0-9a-f]{16}) \|", SHARED_README.read_text())
    )
    assert listed.keys() == UPSTREAM_SHA256.keys()
    for file, prefix in listed.items():
        assert UPSTREAM_SHA256[file].startswith(prefix), file
        assert sha256(data.packaged(file)).startswith(prefix), file


@pytest.mark.fast
def test_the_licence_and_copyright_notice_lie_beside_them():
    licence = (data.PACKAGED_DIR / "copa" / "LICENSE").read_text()
    assert "BSD 2-Clause License" in licence
    assert "Copyright (c) 2011, Melissa Roemmele, Cosmin Adrian Bejan, and Andrew S. Gordon" in (
        licence
    )
    assert "Redistributions in binary form must reproduce the above copyright notice" in licence


def no_download(file):
    raise AssertionError(f"{file}: a download was tried")


@pytest.mark.fast
def test_without_a_data_folder_copa_is_read_from_the_package(monkeypatch, caplog):
    monkeypatch.delenv("DCPMI_DATA_DIR", raising=False)
    monkeypatch.setattr(data, "_download", no_download)
    data._say_once.cache_clear()
    with caplog.at_level(logging.INFO, logger=data.__name__):
        rows = data.xml_items("copa/copa-dev.xml", record="copa")["test"]
    assert len(rows) == 500
    assert rows[0]["p"] == "My body cast a shadow over the grass."
    assert data.locate("copa/copa-test.xml") == data.PACKAGED_DIR / "copa" / "copa-test.xml"
    assert "copa/copa-dev.xml: no data folder is set (DCPMI_DATA_DIR); read from the copy " in (
        caplog.text
    )


@pytest.mark.fast
def test_a_data_folder_that_is_set_wins(tmp_path, monkeypatch):
    monkeypatch.setattr(data, "_download", no_download)
    (tmp_path / "copa").mkdir()
    (tmp_path / "copa" / "copa-dev.xml").write_text(
        '<?xml version="1.0" encoding="UTF-8"?>\n<copa-corpus version="1.0">\n'
        '<item id="7" asks-for="effect" most-plausible-alternative="2">'
        "<p>Mine.</p><a1>One.</a1><a2>Two.</a2></item>\n</copa-corpus>\n"
    )
    for data_dir, env in ((tmp_path, None), (None, tmp_path)):
        if env is None:
            monkeypatch.delenv("DCPMI_DATA_DIR", raising=False)
        else:
            monkeypatch.setenv("DCPMI_DATA_DIR", str(env))
        rows = data.xml_items("copa/copa-dev.xml", record="copa", data_dir=data_dir)["test"]
        assert [row["id"] for row in rows] == ["7"]


@pytest.mark.fast
def test_a_data_folder_without_copa_says_how_to_read_the_packaged_copy(tmp_path):
    with pytest.raises(data.DataError, match=r"unset DCPMI_DATA_DIR to read the copy shipped"):
        data.locate("copa/copa-dev.xml", tmp_path)


def test_dcpmi_copa_builds_from_the_package_offline(monkeypatch):
    # conftest sets HF_HUB_OFFLINE=1 and HF_DATASETS_OFFLINE=1: no network either way.
    monkeypatch.delenv("DCPMI_DATA_DIR", raising=False)
    monkeypatch.setattr(data, "_download", no_download)
    copa = load_task(plugin_task_manager(), "dcpmi_copa")
    assert len(copa.eval_docs) == 500
    assert [d["gold"] for d in copa.eval_docs.select(range(3))] == [0, 0, 1]
    # the results record the digest of what was read: the upstream file's
    assert copa.config.metadata["data_files"] == {
        "copa/copa-dev.xml": UPSTREAM_SHA256["copa/copa-dev.xml"]
    }


@pytest.mark.slow
def test_the_wheel_carries_the_files_and_their_licence(tmp_path):
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(ROOT)],
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("lm_eval_dcpmi-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        for file, digest in UPSTREAM_SHA256.items():
            member = f"lm_eval_dcpmi/data/{file}"
            assert hashlib.sha256(archive.read(member)).hexdigest() == digest, member
        assert "lm_eval_dcpmi/data/copa/LICENSE" in names
        (metadata,) = (name for name in names if name.endswith(".dist-info/METADATA"))
        text = archive.read(metadata).decode()
    assert "License-Expression: MIT AND BSD-2-Clause" in text
    assert "License-File: lm_eval_dcpmi/data/copa/LICENSE" in text
