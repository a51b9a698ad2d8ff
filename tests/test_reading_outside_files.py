"""Files from outside are read within stated limits and must say one thing: a repeated key
in a JSON object is refused (naming the key and its line), a samples file is read as a
stream with a limit on its lines and its size (a gzip padded with gigabytes of spaces is
refused, not read into memory), and a results file larger than any run's is refused.

Each case is refused in one line by every command that reads the file (``dcpmi report``,
``verify``, ``export``), never a traceback or a MemoryError."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from report_helpers import STAMP, ten_document_run

from lm_eval_dcpmi import _json_files, cli
from lm_eval_dcpmi._json_files import parse_json
from lm_eval_dcpmi.errors import DCPMIError
from lm_eval_dcpmi.report import read_samples
from lm_eval_dcpmi.report._results import ReportError

pytestmark = pytest.mark.fast

REPEATED = (
    "the key {key!r} appears a second time in one object; readers differ on which copy counts "
    "(Python keeps the last, others the first), so the file is refused: no lm-eval run writes "
    "a key twice (use the file as the run wrote it)."
)


def refused_by_report(path: Path, tmp_path: Path, capsys, expected: str) -> None:
    """``dcpmi report`` exits 2 with ``expected`` as its one line's end, no traceback; verify
    and export too where ``expected`` is about the results file (the hand-made run is no
    DC-PMI run of theirs: they read no samples of it, tests/test_untrusted_files.py has
    them read a real run's)."""
    export = ["export", str(path), "--format", "hf", "--out", str(tmp_path / "exported")]
    commands = [["report", str(path)]]
    if expected.startswith(str(path)):
        commands += [["verify", str(path)], export]
    for command in commands:
        status = cli.main(command)
        err = capsys.readouterr().err
        assert status == 2, (command, err)
        assert "Traceback" not in err and err.count("\n") == 1, (command, err)
        assert err.strip().endswith(expected), (command, err)


# ------------------------------------------------------------------ repeated keys


@pytest.mark.parametrize(
    ("text", "key", "line"),
    [
        ('{"a": 1,\n "a": 2}', "a", 2),
        ('{"x": {"b": 1},\n "y": {"b": 2,\n  "c": [{"d": 1, "e": 2}],\n  "b": 3}}', "b", 4),
        ('[{"k": 1},\n {"k": 2, "k": 2}]', "k", 2),  # the same value twice is still two
        ('{"s": "\\"a\\": 1, \\"a\\"",\n "a": 1,\n "t": {"a": 0},\n "a": 0}', "a", 4),
        ('{"\\u00e9": 1,\n "\u00e9": 2}', "\u00e9", 2),  # one key, written two ways
    ],
)
def test_a_repeated_key_is_refused_naming_the_key_and_its_line(text, key, line):
    with pytest.raises(DCPMIError) as refused:
        parse_json(text, "f.json")
    assert str(refused.value) == f"f.json:{line}: " + REPEATED.format(key=key)


def test_one_key_in_two_objects_is_no_repetition():
    assert parse_json('{"a": {"k": 1}, "b": {"k": 2}, "c": [{"k": 3}, {"k": 4}]}', "f") == {
        "a": {"k": 1},
        "b": {"k": 2},
        "c": [{"k": 3}, {"k": 4}],
    }


def test_a_forged_value_placed_before_the_genuine_one_is_refused(tmp_path, capsys):
    """The probe's case: ``"acc_dcpmi,none": 0.99`` written before the genuine value (Python
    keeps the last copy, another reader the first)."""
    path = ten_document_run(tmp_path)
    text = path.read_text()
    genuine = '"acc_dcpmi,none": '
    assert text.count(genuine) == 2
    at = text.index(genuine)
    path.write_text(text[:at] + genuine + "0.99,\n" + text[at:])
    line = text[:at].count("\n") + 2  # the genuine copy's, the second
    expected = f"{path}:{line}: " + REPEATED.format(key="acc_dcpmi,none")
    refused_by_report(path, tmp_path, capsys, expected)


def test_a_forged_metric_first_on_a_samples_line_is_refused(tmp_path, capsys):
    path = ten_document_run(tmp_path)
    samples = path.with_name(f"samples_dcpmi_cb_{STAMP}.jsonl")
    lines = samples.read_text().splitlines()
    lines[2] = '{"acc_dcpmi": 1.0, ' + lines[2][1:]
    samples.write_text("\n".join(lines) + "\n")
    expected = f"{samples}:3: " + REPEATED.format(key="acc_dcpmi")
    with pytest.raises(ReportError) as refused:
        read_samples(samples)
    assert str(refused.value) == expected
    refused_by_report(path, tmp_path, capsys, expected)


# ------------------------------------------------------------------ bounded reading


def gzipped(path: Path, *parts: bytes) -> Path:
    """``parts`` written to ``path`` as one gzip stream, chunk by chunk."""
    with gzip.open(path, "wb", compresslevel=1) as file:
        for part in parts:
            file.write(part)
    return path


def test_a_gzip_padded_with_a_line_of_spaces_is_refused_without_reading_it(tmp_path, capsys):
    """The probe's case, smaller: the genuine lines, then one line longer than
    ``MAX_LINE_BYTES`` (64 MiB of spaces, 64 kB gzipped)."""
    path = ten_document_run(tmp_path)
    plain = path.with_name(f"samples_dcpmi_cb_{STAMP}.jsonl")
    packed = gzipped(
        plain.with_suffix(".jsonl.gz"), plain.read_bytes(), b" " * (_json_files.MAX_LINE_BYTES + 1)
    )
    plain.unlink()
    assert packed.stat().st_size < 2**20
    expected = (
        f"{packed}:11: a line longer than 64 MiB (far above any lm-eval sample's); not read. A "
        "forged or padded file: use the file the run wrote."
    )
    refused_by_report(path, tmp_path, capsys, expected)


def test_a_samples_file_larger_than_the_limit_is_refused(tmp_path, capsys, monkeypatch):
    """Lines of spaces beyond ``MAX_LINES_BYTES`` uncompressed (the limit made small here:
    2 GiB of spaces take seconds to decompress)."""
    monkeypatch.setattr(_json_files, "MAX_LINES_BYTES", 2**20)
    path = ten_document_run(tmp_path)
    plain = path.with_name(f"samples_dcpmi_cb_{STAMP}.jsonl")
    packed = gzipped(plain.with_suffix(".jsonl.gz"), plain.read_bytes(), b" " * 1000 + b"\n")
    with gzip.open(packed, "ab") as file:
        file.write((b" " * 1023 + b"\n") * 1024)  # a second gzip member: 1 MiB more
    plain.unlink()
    expected = (
        f"{packed}: uncompressed, larger than the 1 MiB read of one file from outside (far "
        "above any lm-eval run's); not read. A forged or padded file: use the file the run "
        "wrote."
    )
    refused_by_report(path, tmp_path, capsys, expected)


def test_whitespace_lines_and_two_gzip_members_within_the_limits_still_read(tmp_path):
    path = ten_document_run(tmp_path)
    plain = path.with_name(f"samples_dcpmi_cb_{STAMP}.jsonl")
    lines = plain.read_bytes().splitlines(keepends=True)
    packed = gzipped(plain.with_suffix(".jsonl.gz"), *lines[:4], b"  \n\n")
    with gzip.open(packed, "ab") as file:
        file.writelines(lines[4:])
    assert read_samples(packed) == read_samples(plain)


def test_a_truncated_gzip_is_refused_in_one_line(tmp_path, capsys):
    path = ten_document_run(tmp_path)
    plain = path.with_name(f"samples_dcpmi_cb_{STAMP}.jsonl")
    packed = gzipped(plain.with_suffix(".jsonl.gz"), plain.read_bytes())
    packed.write_bytes(packed.read_bytes()[:-20])
    plain.unlink()
    with pytest.raises(
        ReportError, match=rf"^{packed}: cannot be read as a samples file \(Compressed file ended"
    ):
        read_samples(packed)


def test_a_results_file_larger_than_the_limit_is_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(_json_files, "MAX_RESULTS_BYTES", 4096)
    path = ten_document_run(tmp_path)
    path.write_text(json.dumps(json.loads(path.read_text())) + " " * 4096)
    expected = (
        f"{path}: larger than the 4,096 bytes read of one file from outside (far above any lm-eval "
        "run's); not read. A forged or padded file: use the file the run wrote."
    )
    refused_by_report(path, tmp_path, capsys, expected)


def test_a_samples_file_of_more_lines_than_any_split_is_refused(tmp_path, capsys, monkeypatch):
    """Blank lines cost little to store (2**27 of them gzip to 130 kB) but each takes a step
    to read: past ``MAX_LINES`` (made small here) the file is refused, not read for minutes."""
    monkeypatch.setattr(_json_files, "MAX_LINES", 1000)
    path = ten_document_run(tmp_path)
    plain = path.with_name(f"samples_dcpmi_cb_{STAMP}.jsonl")
    packed = gzipped(plain.with_suffix(".jsonl.gz"), plain.read_bytes(), b"\n" * 1000)
    plain.unlink()
    expected = (
        f"{packed}: more than 1,000 lines (a run writes one a document, and no split has that "
        "many); not read. A forged or padded file: use the file the run wrote."
    )
    refused_by_report(path, tmp_path, capsys, expected)


def test_samples_under_another_filter_than_none_are_refused_by_verify(tmp_path):
    """A multiple-choice task has lm-eval's one filter, none: samples logged only under
    another left verify nothing to build (a traceback from lm-eval)."""
    from lm_eval_dcpmi.verification._recompute import task_samples

    path = ten_document_run(tmp_path)
    samples = path.with_name(f"samples_dcpmi_cb_{STAMP}.jsonl")
    lines = [json.loads(line) for line in samples.read_text().splitlines()]
    samples.write_text("".join(json.dumps({**s, "filter": "strict"}) + "\n" for s in lines))
    with pytest.raises(ReportError) as refused:
        task_samples(samples, "here")
    assert str(refused.value) == (
        "here: a sample is logged under the filter 'strict'; a multiple-choice task has "
        "lm-eval's one filter, none, so no run of it wrote this"
    )
