"""Hand-made lm-eval results for the report tests: results rows and files, runs with logged
samples, and reading the report's markdown and figures back. No model, no data."""

from __future__ import annotations

import json
import struct
from pathlib import Path

from lm_eval_dcpmi.report import _looks as looks
from lm_eval_dcpmi.rules import _scoring as scoring

STAMP = "2026-01-01T00-00-00"

# Ten documents, DC-PMI against LM:
#   both right: docs 0-2 (a = 3); only DC-PMI: docs 3-6 (b = 4); only LM: doc 7 (c = 1);
#   neither: docs 8-9 (d = 2). DC-PMI 7/10, LM 4/10.
DCPMI = [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0]
LM = [1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0]


def entry(
    unc: float,
    lm: float,
    avg: float,
    dcpmi: float,
    n: int = 100,
    norm: float | None = None,
    **extra,
) -> dict:
    """A results row as lm-eval writes it for a DC-PMI task; without ``norm`` as the plugin
    wrote it before it reported acc_norm."""
    return {
        **({} if norm is None else {"acc_norm,none": norm, "acc_norm_stderr,none": 0.01}),
        "alias": "x",
        "sample_len": n,
        "acc,none": lm,
        "acc_stderr,none": 0.01,
        "acc_avg,none": avg,
        "acc_avg_stderr,none": 0.01,
        "acc_unc,none": unc,
        "acc_unc_stderr,none": 0.01,
        "acc_dcpmi,none": dcpmi,
        "acc_dcpmi_stderr,none": 0.01,
        "truncated,none": 0.0,
        "truncated_stderr,none": "N/A",
        **extra,
    }


def results_dict(rows: dict[str, dict], model: str = "gpt2", groups=None, limit=None) -> dict:
    groups = groups or {}
    return {
        "results": rows,
        **({"groups": {g: rows[g] for g in groups}} if groups else {}),
        "group_subtasks": groups,
        "n-samples": {
            name: {"original": row["sample_len"], "effective": row["sample_len"]}
            for name, row in rows.items()
            if name not in groups
        },
        "config": {"model": "hf", "model_args": f"pretrained={model}", "limit": limit},
        "model_name": model,
    }


# The paper's five methods, whose columns the report tests check; a rule added to the table
# (a throwaway one, tests/test_one_rule_one_row.py) adds columns these tests leave out.
PAPER = ("acc_unc", "acc", "acc_avg", "acc_norm", "acc_dcpmi")
OTHER_COLUMNS = {looks.metric_label(m) for m in scoring.METHODS if m not in PAPER}


def md_rows(markdown: str) -> dict[str, list[str]]:
    """``{first cell: other cells}`` of every table body row in ``markdown``, without the
    columns of methods other than the paper's five (``OTHER_COLUMNS``: none, unless a test
    added a rule to the table)."""
    rows = {}
    dropped: set[int] = set()
    for line in markdown.splitlines():
        if not line.startswith("| ") or "---" in line:
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        if line.startswith("| Task"):
            dropped = {i for i, c in enumerate(cells) if set(c.split()) & OTHER_COLUMNS}
            continue
        cells = [c for i, c in enumerate(cells) if i not in dropped]
        rows[cells[0].strip("*")] = cells[1:]
    return rows


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def write_run(folder: Path, data: dict, samples: dict[str, list[dict]]) -> Path:
    """A results file and its samples files, named as lm-eval names them."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"results_{STAMP}.json"
    path.write_text(json.dumps(data))
    for task, lines in samples.items():
        text = "".join(json.dumps(line) + "\n" for line in lines)
        (folder / f"samples_{task}_{STAMP}.jsonl").write_text(text)
    return path


def metric_samples(values: dict[str, list[float]]) -> list[dict]:
    """Samples holding only the per-document metric values (all that intervals need)."""
    n = len(next(iter(values.values())))
    return [
        {"doc_id": i, "filter": "none", **{m: v[i] for m, v in values.items()}} for i in range(n)
    ]


def ten_document_run(tmp_path: Path) -> Path:
    # dcpmi_copa: DC-PMI 7/10 against LM = Avg = Char 4/10 and Unc 0/10 (see
    # test_report_stats for the hand computation). dcpmi_cb: DC-PMI 10/10, the rest 0/10.
    copa = {"acc_dcpmi": DCPMI, "acc": LM, "acc_avg": LM, "acc_norm": LM, "acc_unc": [0.0] * 10}
    cb = {m: [1.0 if m == "acc_dcpmi" else 0.0] * 10 for m in scoring.METHODS}
    data = results_dict(
        {
            "dcpmi_copa": entry(0.0, 0.4, 0.4, 0.7, n=10, norm=0.4),
            "dcpmi_cb": entry(0.0, 0.0, 0.0, 1.0, n=10, norm=0.0),
        }
    )
    samples = {"dcpmi_copa": metric_samples(copa), "dcpmi_cb": metric_samples(cb)}
    return write_run(tmp_path / "gpt2", data, samples)
