"""No data folder, but a network: the upstream files come through the tasks' own download
(``datasets``' download manager over HTTP, nothing replaced), checked against the sha256
their dataset folders record.

The upstream files and archives (COPA-resources.tgz, ARC-V1-Feb2018.zip, RACE.tar.gz, the
SuperGLUE zips, ...) are built here from the data folder's files in the layouts the
dataset folders' ``FILES`` name, and served by an ``http.server`` on 127.0.0.1 (a thread of
this process) at their upstream paths; ``DCPMI_DATA_MIRROR`` points every download at it.
``dcpmi fetch`` and ``dcpmi run`` run as commands without ``DCPMI_DATA_DIR``, with the
datasets cache (all the download manager writes) in the test's folder.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import re
import shutil
import subprocess
import tarfile
import threading
import zipfile
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from helpers import DCPMI, HELLASWAG_FILE, ROOT

from lm_eval_dcpmi import cli
from lm_eval_dcpmi.data import _upstream, jsonl, known_as, sha256_of
from lm_eval_dcpmi.data._folders import dataset_module, upstream_files
from lm_eval_dcpmi.data._loaders import locate
from lm_eval_dcpmi.errors import DataError

FILES = upstream_files()
# The archives' top folders where their FILES member does not start with one (as the
# upstream archives hold them: ARC-V1-Feb2018.zip unpacks into ARC-V1-Feb2018-2/, ...).
TOP_FOLDER = {"ARC-V1-Feb2018.zip": "ARC-V1-Feb2018-2/", "OpenBookQA-V1-Sep2018.zip":
              "OpenBookQA-V1-Sep2018/"}  # fmt: skip
UPSTREAM_PATHS = sorted({urlsplit(source.url).path for source in FILES.values()})


def build_upstream(root: Path, data: Path) -> None:
    """The upstream hosts' files under ``root`` at their URL paths, made of ``data``'s files:
    a plain file as it is, an archive holding each of its FILES members (RACE's dev folders,
    where ``data`` has them, beside the test ones: the member's path, not its name, finds
    the right folder)."""
    members: dict[Path, dict[str, Path]] = {}
    for file, source in FILES.items():
        target = root / urlsplit(source.url).path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.member is None:
            shutil.copyfile(data / file, target)
            continue
        top = TOP_FOLDER.get(target.name, "")
        members.setdefault(target, {})[top + source.member] = data / file
        dev = data / file.replace("race/test/", "race/dev/")
        if file.startswith("race/test/") and dev.is_dir():  # ../shared/data has them
            members[target][f"RACE/dev/{dev.name}"] = dev
    for archive, inside in members.items():
        if archive.name.endswith(".zip"):
            with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zipped:
                for name, path in inside.items():
                    zipped.write(path, name)
        else:  # .tgz, .tar.gz
            with tarfile.open(archive, "w:gz", compresslevel=1) as tarred:
                for name, path in inside.items():
                    tarred.add(path, name)


class Recording(http.server.SimpleHTTPRequestHandler):
    """Serves a folder and notes each request (method, path) on its server."""

    def send_head(self):  # both GET and HEAD come here
        self.server.seen.append((self.command, self.path))  # type: ignore[attr-defined]
        return super().send_head()

    def log_message(self, format, *args):  # quiet: the test reads ``seen`` instead
        pass


@dataclass
class Mirror:
    url: str
    root: Path
    seen: list[tuple[str, str]] = field(default_factory=list)

    def gets(self) -> Counter:
        return Counter(path for method, path in self.seen if method == "GET")


@pytest.fixture(scope="module")
def mirror(tmp_path_factory, data_dir) -> Iterator[Mirror]:
    root = tmp_path_factory.mktemp("upstream")
    build_upstream(root, data_dir)
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(Recording, directory=str(root))
    )
    served = Mirror(f"http://127.0.0.1:{server.server_address[1]}", root)
    server.seen = served.seen  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield served
    server.shutdown()
    server.server_close()


def no_data_folder(tmp_path: Path, mirror_url: str) -> dict[str, str]:
    """The environment of a machine with no data folder that downloads from ``mirror_url``:
    the datasets library online (conftest turns it offline), its cache in ``tmp_path``."""
    env = {k: v for k, v in os.environ.items() if k != "DCPMI_DATA_DIR"}
    no_proxy = ",".join(filter(None, [env.get("NO_PROXY"), "127.0.0.1"]))
    return {**env, "DCPMI_DATA_MIRROR": mirror_url, "HF_DATASETS_OFFLINE": "0",
            "HF_DATASETS_CACHE": str(tmp_path / "hf-datasets"), "NO_PROXY": no_proxy,
            "no_proxy": no_proxy}  # fmt: skip


def fetch(data: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([DCPMI, "fetch", "--data_dir", str(data)], capture_output=True,
                          text=True, env=env, timeout=300)  # fmt: skip


def listed(stdout: str, kind: str) -> list[str]:
    """The files ``dcpmi fetch`` lists as ``kind`` (fetched, cached)."""
    return re.findall(rf"^{kind} +(\S+)  sha256 ", stdout, re.MULTILINE)


def test_fetch_downloads_every_file_once_checked_then_nothing(mirror, data_dir, tmp_path):
    data = tmp_path / "data"
    env = no_data_folder(tmp_path, mirror.url)
    mirror.seen.clear()
    first = fetch(data, env)
    assert first.returncode == 0, first.stderr[-3000:]
    assert sorted(listed(first.stdout, "fetched")) == sorted(FILES) and len(FILES) == 16
    # each upstream file or archive went over the wire once (ARC's zip and RACE's tarball
    # serve two files each), into the datasets cache under tmp_path
    assert mirror.gets() == Counter(dict.fromkeys(UPSTREAM_PATHS, 1))
    assert any((tmp_path / "hf-datasets" / "downloads").iterdir())
    for file, source in FILES.items():
        digest = sha256_of(data / file)
        assert digest == sha256_of(data_dir / file), file  # the data folder's bytes
        assert digest in {source.sha256, *(copy.sha256 for copy in source.copies)}, file
        address = f"{mirror.url}{urlsplit(source.url).path}"
        line = f"{file}  sha256 {digest[:16]}..., {known_as(file, digest)}; from {address}"
        assert f"fetched  {line}\n" in first.stdout
    assert first.stdout.rstrip().endswith(
        f"16 files in {data}: 16 fetched, 0 already there (cached); every sha256 checked. "
        f"Use them: export DCPMI_DATA_DIR={data}"
    )
    # the folder is a data folder the tasks read
    assert len(jsonl("arc/ARC-Easy-Test.jsonl", data_dir=data)["test"]) == 2376
    assert locate("race/test/high", data, folder=True) == data / "race" / "test" / "high"

    mirror.seen.clear()
    again = fetch(data, env)
    assert again.returncode == 0, again.stderr[-3000:]
    assert sorted(listed(again.stdout, "cached")) == sorted(FILES)
    assert listed(again.stdout, "fetched") == [] and mirror.seen == []  # not even a HEAD
    assert "16 files in " in again.stdout and ": 0 fetched, 16 already there" in again.stdout


def copy_files(source: Path, target: Path, files) -> None:
    for file in files:
        (target / file).parent.mkdir(parents=True, exist_ok=True)
        copy = shutil.copytree if (source / file).is_dir() else shutil.copyfile
        copy(source / file, target / file)


def test_a_download_with_another_sha256_stops_the_fetch_named(mirror, data_dir, tmp_path):
    # the mirror's path prefix /altered/ holds a TREC file with one byte changed; the data
    # folder holds every other file already, so that TREC's is the one download
    trec = "trec/test.txt"
    path = urlsplit(FILES[trec].url).path
    altered = mirror.root / "altered" / path.lstrip("/")
    altered.parent.mkdir(parents=True)
    altered.write_bytes((data_dir / trec).read_bytes().replace(b"DESC", b"DESK", 1))
    data = tmp_path / "data"
    copy_files(data_dir, data, [file for file in FILES if file != trec])
    mirror.seen.clear()
    done = fetch(data, no_data_folder(tmp_path, f"{mirror.url}/altered/"))
    assert done.returncode == 2
    got, expected = sha256_of(altered), FILES[trec].sha256
    assert got != expected
    address = f"{mirror.url}/altered{path}"
    line = done.stderr.rstrip().splitlines()[-1]
    assert line.startswith(
        f"dcpmi fetch: {trec}: downloaded from {address}, its sha256 is {got}, but "
        f"task_configs/trec/dataset.py records {expected}: the server sent other bytes than "
        f"the upstream file. Check what {address} serves (and DCPMI_DATA_MIRROR, if set), "
        "remove the cached download (rm -r "
    )
    assert str(tmp_path / "hf-datasets" / "downloads") in line
    assert "Traceback" not in done.stderr
    assert sorted(listed(done.stdout, "cached")) == sorted(set(FILES) - {trec})
    assert not (data / trec).exists()  # nothing unchecked lands in the folder
    assert mirror.gets() == Counter({f"/altered{path}": 1})


@pytest.mark.fast
def test_a_file_in_the_folder_with_another_sha256_is_named_and_kept(tmp_path, capsys):
    first = next(iter(FILES))  # agnews/test.csv: looked at before anything is downloaded
    wrong = tmp_path / first
    wrong.parent.mkdir(parents=True)
    wrong.write_text("Class Index,Title,Description\n")
    got = sha256_of(wrong)
    assert cli.main(["fetch", "--data_dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.splitlines() == [
        f"dcpmi fetch: {wrong}: sha256 {got}, but task_configs/agnews/dataset.py records "
        f"{FILES[first].sha256} for {first}: not the upstream file. Move it out of the way (or "
        "delete it) and run dcpmi fetch again, which downloads the upstream file."
    ]
    assert wrong.read_text() == "Class Index,Title,Description\n"


@pytest.mark.slow
def test_a_task_downloads_its_archive_through_the_mirror_and_scores(mirror, tmp_path):
    """`dcpmi run` on the embedded model, no data folder: ARC-Easy's file comes out of the
    zip the download manager fetched, and the results record the upstream file's sha256."""
    mirror.seen.clear()
    out = tmp_path / "out"
    command = [DCPMI, "run", "--tasks", "dcpmi_arc_easy", "--limit", "2", "--log_samples",
               "--output_path", str(out)]  # fmt: skip
    env = no_data_folder(tmp_path, mirror.url)
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert mirror.gets() == Counter({"/arc/ARC-V1-Feb2018.zip": 1})
    (results_file,) = out.rglob("results_*.json")
    results = json.loads(results_file.read_text())
    config = results["configs"]["dcpmi_arc_easy"]
    assert config["metadata"]["data_files"] == {
        "arc/ARC-Easy-Test.jsonl": FILES["arc/ARC-Easy-Test.jsonl"].sha256
    }
    assert results["n-samples"]["dcpmi_arc_easy"] == {"original": 2376, "effective": 2}
    accuracy = results["results"]["dcpmi_arc_easy"]["acc_dcpmi,none"]
    assert accuracy in (0.0, 0.5, 1.0)
    (samples,) = out.rglob("samples_dcpmi_arc_easy_*.jsonl")
    first = json.loads(samples.read_text().splitlines()[0])
    assert first["doc"]["source"] == "arc/ARC-Easy-Test.jsonl:1"


# ---- the recorded digests ---------------------------------------------------------------


@pytest.mark.fast
def test_every_file_records_its_sha256_and_the_shared_readme_agrees():
    for file, source in FILES.items():
        assert re.fullmatch(r"[0-9a-f]{64}", source.sha256 or ""), file
    readme = ROOT.parent / "shared" / "data" / "README.md"
    if not readme.is_file():
        pytest.skip(f"{readme} is not here")
    # its table's first 16 hex digits: the upstream files', HellaSwag's rebuilt copy's
    listed = dict(re.findall(r"\| `([\w/.-]+)` \| [^|]+\| ([0-9a-f]{16}) \|", readme.read_text()))
    checked = {file: prefix for file, prefix in listed.items() if file in FILES}
    assert len(checked) == 13
    for file, prefix in checked.items():
        digests = {FILES[file].sha256, *(copy.sha256 for copy in FILES[file].copies)}
        assert prefix in {digest[:16] for digest in digests}, file


def test_the_data_folders_files_are_the_recorded_ones(data_dir):
    for file in FILES:
        assert known_as(file, sha256_of(data_dir / file)) is not None, file


# ---- DCPMI_DATA_MIRROR -------------------------------------------------------------------


@pytest.mark.fast
@pytest.mark.parametrize(
    ("value", "address"),
    [
        ("http://127.0.0.1:8000", "http://127.0.0.1:8000/arc/ARC-V1-Feb2018.zip"),
        ("https://mirror.example.org/dcpmi/", "https://mirror.example.org/dcpmi/arc/ARC-V1-Feb2018.zip"),
    ],
)  # fmt: skip
def test_the_mirror_keeps_the_upstream_path(value, address):
    arc = FILES["arc/ARC-Easy-Test.jsonl"].url
    assert arc == "https://ai2-public-datasets.s3.amazonaws.com/arc/ARC-V1-Feb2018.zip"
    assert _upstream.parse_mirror(value).address(arc) == address
    assert _upstream.mirror_from_env({"DCPMI_DATA_MIRROR": value}) == _upstream.parse_mirror(value)
    assert _upstream.mirror_from_env({"DCPMI_DATA_MIRROR": " "}) is None


@pytest.mark.fast
@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("ftp://127.0.0.1/", "is not an http:// or https:// address"),
        ("127.0.0.1:8000", "is not an http:// or https:// address"),
        ("http://", "names no host"),
        ("http://127.0.0.1:99999", "has a port that is not a number from 0 to 65535"),
        ("http://127.0.0.1:8000/?x=1", "has a query or fragment (#...)"),
    ],
)
def test_a_mirror_that_is_no_http_address_stops_in_one_line(value, problem, tmp_path,
                                                            monkeypatch, capsys):  # fmt: skip
    monkeypatch.setenv("DCPMI_DATA_MIRROR", value)
    assert cli.main(["fetch", "--data_dir", str(tmp_path / "data")]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"dcpmi fetch: DCPMI_DATA_MIRROR={value!r} {problem}")
    assert line.endswith(
        "Set it to the http(s) address of a server that holds the upstream files at their "
        "upstream paths (e.g. DCPMI_DATA_MIRROR=http://127.0.0.1:8000), or unset it to "
        "download from the upstream addresses."
    )
    assert not (tmp_path / "data").exists()
    # a task's download reads it where it starts, with the same message
    monkeypatch.delenv("DCPMI_DATA_DIR", raising=False)
    with pytest.raises(DataError, match=re.escape(f"DCPMI_DATA_MIRROR={value!r} {problem}")):
        locate("trec/test.txt")


# ---- HellaSwag: the committed results read the rebuilt file ----------------------------


@pytest.mark.fast
def test_verify_says_the_committed_hellaswag_runs_read_the_rebuilt_file(tmp_path):
    from lm_eval_dcpmi.verification import read_submission
    from lm_eval_dcpmi.verification._against_data import other_data, recorded_digest_findings

    rebuilt = dataset_module("hellaswag").REBUILT_SHA256
    upstream = FILES[HELLASWAG_FILE].sha256
    (path,) = [p for p in (ROOT / "results" / "full").glob("results_*.json")
               if "dcpmi_hellaswag" in json.loads(p.read_text())["results"]]  # fmt: skip
    task = read_submission(path).tasks["dcpmi_hellaswag"]
    assert task.data_files == {HELLASWAG_FILE: rebuilt}
    (tmp_path / "hellaswag").mkdir()
    (tmp_path / HELLASWAG_FILE).write_text('{"ctx": "A man sits.", "endings": ["a"], "label": 0}\n')
    here = sha256_of(tmp_path / HELLASWAG_FILE)
    (finding,) = recorded_digest_findings(task, str(tmp_path), "r.json (dcpmi_hellaswag)")
    said = (
        f"data file {HELLASWAG_FILE}: the file here has sha256 {here[:16]}..., but the run read "
        f"{rebuilt[:16]}...: other data. The run read the rebuilt HellaSwag file that the "
        "committed results were scored on (described in docs/tasks.md under Data), sha256 "
        "528858e8d59c5ac5..., not the file you have."
    )
    assert str(finding) == f"r.json (dcpmi_hellaswag): {said}"
    # with the upstream file (no copy of it here: its recorded digest stands for it)
    assert other_data(HELLASWAG_FILE, upstream, rebuilt).endswith(
        "sha256 528858e8d59c5ac5..., not the upstream file you have."
    )
    # another file's difference says no more than before
    assert other_data("cb/val.jsonl", "1" * 64, "2" * 64) == (
        "data file cb/val.jsonl: the file here has sha256 1111111111111111..., but the run "
        "read 2222222222222222...: other data"
    )
