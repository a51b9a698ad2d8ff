"""Regenerate the committed results pages, or check them: each set's report in
``results/<set>/`` and the results tables of README.md and docs/*.md (``results_pages.py``
says what the blocks are).

    .venv/bin/python scripts/make_results.py           # rewrite them
    .venv/bin/python scripts/make_results.py --check   # exit 1, naming what is stale
    .venv/bin/python scripts/make_results.py --add RESULTS_FILE --set NAME   # add a run first

Adding a run is: put its results file into ``results/<set>/``, run this script, commit.
``--add RESULTS_FILE --set NAME`` does the first step for a run with ``--log_samples``: it
copies the results file and writes each samples file beside it as
``samples_<task>_<date>.jsonl.gz`` compacted (``compact_sample``: doc_id, filter, target,
each metric's per-document value and each request's loglikelihood and is-greedy flag; the
prompts are left out, ~1 GB for a full run, since ``dcpmi verify`` builds them again from
the data). A split scored in shards (``dcpmi run --shard K/N``, ``scripts/score_parts.py``)
is added as the run ``dcpmi merge`` makes of its shards.
"""

from __future__ import annotations

import argparse
import gzip
import json
import struct
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from results_pages import (
    RESULTS,
    ROOT,
    is_input,
    pages,
    render_page,
    result_sets,
    set_files,
    write_reports,
)

from lm_eval_dcpmi._harness._model_args import recorded_model_args
from lm_eval_dcpmi._identity import portable_results
from lm_eval_dcpmi._json_files import read_json, write_json
from lm_eval_dcpmi.report._results import METHODS
from lm_eval_dcpmi.rules import _scoring as scoring

# What a trimmed sample keeps: its identity and every per-document metric value.
KEPT = ("doc_id", "filter", "target", *METHODS, *scoring.COUNTS)


def kept(key: str) -> bool:
    """A sample key the trimmed samples keep: ``KEPT``, and every other accuracy and measure
    of the metrics table (CC, BC's per-document item, PMI under the priors study's
    contexts, PMA)."""
    if key in KEPT:
        return True
    metric = None if key.endswith("_stderr") else scoring.metric_named(key)
    return metric is not None and metric.kind in ("accuracy", "measure")


def _answer(response: Any) -> list[Any]:
    """One request's answer ``[loglikelihood, is_greedy]`` as numbers (JSONL logs strings;
    lm-eval 0.5.0.dev1 wraps the pair in a list of repeats)."""
    while isinstance(response[0], (list, tuple)):
        response = response[0]
    ll, greedy = response
    return [float(ll), greedy in (True, "True", "true", 1, "1")]


def compact_sample(sample: dict[str, Any]) -> dict[str, Any]:
    """A sample as the committed results keep it: its identity, every per-document metric
    value (``kept``) and each request's answer, in request order (``filtered_resps``: what
    ``dcpmi verify`` recomputes from, on the requests it builds again from the data)."""
    compact = {key: value for key, value in sample.items() if kept(key)}
    if sample.get("filtered_resps"):
        compact["filtered_resps"] = [_answer(r) for r in sample["filtered_resps"]]
    return compact


def add_run(
    results_file: Path, set_name: str, root: Path = ROOT, model_id: str | None = None
) -> list[Path]:
    """Copy ``results_file`` into ``results/<set_name>/``, naming its model portably
    (``model_id``, else as ``dcpmi run`` finds it), with its samples files trimmed
    (``KEPT``) and gzipped; returns the files written."""
    target = root / RESULTS / set_name
    target.mkdir(parents=True, exist_ok=True)
    # Committed results name the model by its hub id and hold no path of this machine.
    data = read_json(results_file)
    data = portable_results(data, recorded_model_args(data), model_id)
    written = [target / results_file.name]
    write_json(written[0], data)
    stamp = results_file.name.removeprefix("results_").removesuffix(".json")
    for samples in sorted(results_file.parent.glob(f"samples_*_{stamp}.jsonl")):
        out = target / (samples.name + ".gz")
        with samples.open(encoding="utf-8") as lines:
            write_samples_gz(
                out, (compact_sample(json.loads(line)) for line in lines if line.strip())
            )
        written.append(out)
    return written


def write_samples_gz(out: Path, samples: Iterable[dict[str, Any]]) -> None:
    """Samples as committed: one JSON line each, gzipped with mtime 0 (the same samples give
    the same bytes: make_results --check compares them)."""
    with gzip.GzipFile(out, "wb", mtime=0) as gz:
        for sample in samples:
            gz.write((json.dumps(sample) + "\n").encode("utf-8"))


def png_software(path: Path) -> str | None:
    """The ``Software`` text chunk of a PNG (matplotlib writes its version there)."""
    data = path.read_bytes()
    at = 8
    while at + 8 <= len(data):
        (length,) = struct.unpack(">I", data[at : at + 4])
        kind = data[at + 4 : at + 8]
        if kind == b"tEXt":
            key, _, value = data[at + 8 : at + 8 + length].partition(b"\0")
            if key == b"Software":
                return value.decode("latin-1")
        at += 12 + length
    return None


def png_size(path: Path) -> tuple[int, int]:
    return struct.unpack(">II", path.read_bytes()[16:24])


def same_file(committed: Path, made: Path) -> bool:
    """Equal bytes; for PNGs made by another matplotlib version (fonts and antialiasing
    may differ), equal pixel sizes."""
    if committed.suffix == ".png" and png_software(committed) != png_software(made):
        return png_size(committed) == png_size(made)
    return committed.read_bytes() == made.read_bytes()


def problems(root: Path = ROOT) -> list[str]:
    """What is stale: results against a fresh generation, and every page's blocks."""
    found = []
    with tempfile.TemporaryDirectory() as tmp:
        fresh = Path(tmp)
        write_reports(fresh, root)
        committed = root / RESULTS
        have = set_files(committed)
        made = {p.relative_to(fresh) for p in fresh.rglob("*") if p.is_file()}
        inputs = {p for p in have if is_input(p)}
        for path in sorted(made - have):
            found.append(f"{RESULTS / path}: missing (the command makes it)")
        for path in sorted(have - made - inputs):
            found.append(f"{RESULTS / path}: neither an input nor made by the command")
        for path in sorted(made & have):
            if not same_file(committed / path, fresh / path):
                found.append(f"{RESULTS / path}: differs from what the command makes")
    for page in pages(root):
        text = (root / page).read_text(encoding="utf-8")
        if render_page(text, page, root) != text:
            found.append(f"{page}: a results block differs from what the command makes")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if stale")
    parser.add_argument("--add", type=Path, help="a run's results file to add first (--set)")
    parser.add_argument("--set", dest="set_name", help="the folder under results for --add")
    parser.add_argument("--model_id", help="--add: the model's hub id, if its path names none")
    parser.add_argument(
        "--portable", action="store_true", help="rewrite the committed results files portably"
    )
    args = parser.parse_args(argv)
    if args.add is not None:
        if not args.set_name or not args.add.is_file():
            parser.error("--add takes an existing results file, and --set the folder's name")
        for path in add_run(args.add, args.set_name, model_id=args.model_id):
            print(f"added {path.relative_to(ROOT)}")
    if args.portable:
        for files in result_sets().values():
            for path in (ROOT / f for f in files):
                data = read_json(path)
                write_json(path, portable_results(data, recorded_model_args(data), args.model_id))
                print(f"made portable {path.relative_to(ROOT)}")
    if args.check:
        found = problems()
        for line in found:
            print(f"make_results: {line}", file=sys.stderr)
        return 1 if found else 0
    for path in write_reports(ROOT / RESULTS):
        print(f"wrote {path.relative_to(ROOT) if path.is_absolute() else path}")
    for page in pages():
        text = (ROOT / page).read_text(encoding="utf-8")
        new = render_page(text, page)
        if new != text:
            (ROOT / page).write_text(new, encoding="utf-8")
            print(f"updated {page}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
