"""The committed results pages: docs/results and the results tables of README.md and
docs/*.md, regenerated (``scripts/make_results.py`` calls ``main``).

    .venv/bin/python scripts/make_results.py           # rewrite them
    .venv/bin/python scripts/make_results.py --check   # exit 1, naming what is stale

Inputs are the lm-eval results files of runs, ``docs/results/<set>/results_*.json`` (with
any ``samples_<task>_<date>.jsonl`` that ``--log_samples`` wrote beside them). Each folder
``<set>`` is one report: ``dcpmi report <its results files> --out docs/results/<set>``
writes ``report.md``, ``report.csv``, the figures (and ``intervals.csv`` with samples,
``summary.*`` with several models); outputs left from an earlier run are removed.

In README.md and docs/*.md, the text between ``<!-- results:NAME -->`` and
``<!-- /results:NAME -->`` is replaced: NAME ``<set>`` gives a caption and the main table
of every run in the set (with a mean row; ``+figure`` after the name embeds the run's
figure), NAME
``<set>/<study group or task>`` that study's or task's table. A set with no results file
gives a placeholder saying where to put one. Adding a run is: put its results file into
``docs/results/<set>/``, run this script, commit. ``--add RESULTS_FILE --set NAME`` does the
first step for a run with ``--log_samples``: it copies the results file and writes each
samples file beside it as ``samples_<task>_<date>.jsonl.gz`` compacted (``compact_sample``:
doc_id, filter, target, each metric's per-document value and each request's loglikelihood
and is-greedy flag; the prompts are left out, ~1 GB for a full run, since ``dcpmi verify``
builds them again from the data). A split scored in shards (``dcpmi run --shard K/N``,
``scripts/score_parts.py``) is added as the run ``dcpmi merge`` makes of its shards.

Nothing here loads a model or imports lm-eval (only ``lm_eval_dcpmi.report``).
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import json
import math
import os
import re
import struct
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from lm_eval_dcpmi import paper, report
from lm_eval_dcpmi.leaderboard.portable import portable_results, read_json, write_json
from lm_eval_dcpmi.report import comparisons, studies
from lm_eval_dcpmi.report.command import FORMATS, write_outputs
from lm_eval_dcpmi.report.figures import figure_name
from lm_eval_dcpmi.report.formatting import value_text
from lm_eval_dcpmi.report.results import METHODS, RunResults, number
from lm_eval_dcpmi.rules import scoring

# The repository's root: this module works on a checkout (the editable install that
# scripts/setup.sh makes), where docs/ and README.md are.
ROOT = Path(__file__).resolve().parents[2]
RESULTS = Path("docs/results")  # relative to ROOT: report.md names its sources this way
PAGES = ("README.md", "docs/*.md")
INPUTS = ("results_*.json", "samples_*.json", "samples_*.jsonl", "samples_*.jsonl.gz")
# What a trimmed sample keeps: its identity and every per-document metric value.
KEPT = ("doc_id", "filter", "target", *METHODS, *scoring.COUNTS)


def kept(key: str) -> bool:
    """A sample key the trimmed samples keep: ``KEPT``, and every other accuracy of the
    metrics table (CC, BC's per-document item, PMI under the priors study's contexts)."""
    if key in KEPT:
        return True
    metric = None if key.endswith("_stderr") else scoring.metric_named(key)
    return metric is not None and metric.kind == "accuracy"


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


OUTPUTS = ("report.md", "report.csv", "summary.md", "summary.csv", "intervals.csv", "*.png")
BLOCK = re.compile(
    r"(?P<open><!-- results:(?P<name>[\w./-]+)(?P<options>(?: \+\w+)*) -->\n)"
    r"(?P<body>.*?)"
    r"(?P<close><!-- /results:(?P=name) -->)",
    re.S,
)


@contextmanager
def _in(folder: Path) -> Iterator[None]:
    before = Path.cwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(before)


def result_sets(root: Path = ROOT) -> dict[str, list[Path]]:
    """``{set: its results files}``, paths relative to ``root``, sets and files sorted."""
    sets = {}
    folder = root / RESULTS
    for sub in sorted(p for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []:
        files = sorted(sub.glob("results_*.json"))
        if files:
            sets[sub.name] = [f.relative_to(root) for f in files]
    return sets


def is_input(path: Path) -> bool:
    return any(path.match(pattern) for pattern in INPUTS)


def write_reports(out: Path, root: Path = ROOT) -> list[Path]:
    """``dcpmi report`` of every set into ``out/<set>`` (``out`` relative to ``root`` or
    absolute); removes the outputs of an earlier run that this one did not make. Returns
    the files written."""
    written: list[Path] = []
    with _in(root):
        for name, files in result_sets(root).items():
            target = out / name
            runs = report.load_results([str(f) for f in files])
            made = write_outputs(runs, report.markdown_report(runs), target, FORMATS, True)
            for path in set(target.iterdir()) - set(made):
                if path.is_file() and not is_input(path) and any(path.match(g) for g in OUTPUTS):
                    path.unlink()
            written += made
    return written


def add_run(
    results_file: Path, set_name: str, root: Path = ROOT, model_id: str | None = None
) -> list[Path]:
    """Copy ``results_file`` into ``docs/results/<set_name>/``, naming its model portably
    (``model_id``, else as ``dcpmi run`` finds it), with its samples files trimmed
    (``KEPT``) and gzipped; returns the files written."""
    target = root / RESULTS / set_name
    target.mkdir(parents=True, exist_ok=True)
    # Committed results name the model by its hub id and hold no path of this machine.
    data = portable_results(read_json(results_file), model_id)
    written = [target / results_file.name]
    write_json(written[0], data)
    stamp = results_file.name.removeprefix("results_").removesuffix(".json")
    for samples in sorted(results_file.parent.glob(f"samples_*_{stamp}.jsonl")):
        out = target / (samples.name + ".gz")
        # mtime=0: the same samples give the same bytes (make_results --check compares them)
        with samples.open(encoding="utf-8") as lines, gzip.GzipFile(out, "wb", mtime=0) as gz:
            for line in lines:
                if line.strip():
                    gz.write((json.dumps(compact_sample(json.loads(line))) + "\n").encode("utf-8"))
        written.append(out)
    return written


# ---------------------------------------------------------------- Markdown blocks


def _link(target: Path, page: Path) -> str:
    """``target`` (relative to the root) as a link from the page ``page``."""
    return Path(os.path.relpath(target, page.parent)).as_posix()


def _mean_row(run: RunResults) -> str:
    tasks = run.tasks
    cells = []
    for method in METHODS:
        values = [row.scores.get(method) for row in tasks]
        if any(v is None for v in values):
            cells.append(value_text(None))
        else:
            cells.append(value_text(math.fsum(values) / len(values)))  # type: ignore[arg-type]
    return f"| *mean ({len(tasks)} tasks)* | | " + " | ".join(cells) + " |"


def join_parts(runs: list[RunResults]) -> list[tuple[RunResults, list[RunResults]]]:
    """``(run, its parts)``: the runs of one model over disjoint tasks (a suite scored in
    several runs, e.g. ``docs/results/full``) joined into one run whose rows are all their
    tasks in paper order; any other run alone."""
    by_model: dict[str, list[RunResults]] = {}
    for run in runs:
        by_model.setdefault(run.model_name, []).append(run)
    order = {task: i for i, task in enumerate(paper.paper_order())}
    joined = []
    for group in by_model.values():
        tasks = [row.task for run in group for row in run.main_rows]
        plain = all(run.main_rows == run.tasks and not run.studies for run in group)
        if len(group) > 1 and plain and len(tasks) == len(set(tasks)):
            rows = sorted(
                (row for run in group for row in run.tasks),
                key=lambda row: order.get(row.task, len(order)),
            )
            joined.append((dataclasses.replace(group[0], rows=rows), group))
        else:
            joined += [(run, [run]) for run in group]
    return joined


def _documents(run: RunResults) -> str:
    n = sum(row.n or 0 for row in run.tasks)
    total = sum(row.n_total or row.n or 0 for row in run.tasks)
    return f"{n:,} documents" if n == total else f"{n:,} of {total:,} documents"


def _parts_caption(run: RunResults, parts: list[RunResults], page: Path) -> str:
    documents = _documents(run)
    models = sorted({str((part.data.get("config") or {}).get("model", "?")) for part in parts})
    sources = [part.source for part in parts if part.source is not None]
    files = [f"[{source.name}]({_link(source, page)})" for source in sources]
    folder = sources[0].parent
    if len(files) > 4:  # a suite scored one task per run: the folder, not each file
        where = f"results files in [{folder.as_posix()}]({_link(folder, page)})"
    else:
        where = "results files " + ", ".join(files)
    return (
        f"`{run.model_name}`, lm-eval model `{'`, `'.join(models)}`, {documents} of "
        f"{len(run.tasks)} tasks, scored in {len(parts)} runs ({where}); "
        f"[report]({_link(folder / 'report.md', page)})."
    )


def _caption(run: RunResults, page: Path) -> str:
    config = run.data.get("config") or {}
    source = run.source
    assert source is not None
    stamp = re.search(r"\d{4}-\d\d-\d\d", source.name)
    documents = _documents(run)
    limit = number(config.get("limit"))
    if not math.isnan(limit):
        documents += f" (`--limit {limit:g}`)"
    folder = source.parent
    parts = [
        f"`{run.model_name}`, lm-eval model `{config.get('model', '?')}`, {documents}",
        *([f"run {stamp.group(0)}"] if stamp else []),
        f"[results file]({_link(source, page)})",
        f"[report]({_link(folder / 'report.md', page)})",
    ]
    return "; ".join(parts) + "."


def _run_table(
    run: RunResults, page: Path, figure: bool, parts: list[RunResults] | None = None
) -> list[str]:
    lines = report.markdown_table(run).rstrip("\n").splitlines()
    if len(run.tasks) > 1 and not any(row.is_group for row in run.main_rows):
        lines.append(_mean_row(run))
    caption = _parts_caption(run, parts, page) if parts and len(parts) > 1 else _caption(run, page)
    out = [caption, "", *lines]
    if figure and not (parts and len(parts) > 1):  # figures are per results file
        assert run.source is not None
        path = run.source.parent / figure_name(run)
        out += ["", f"![Accuracy per task and method; DC-PMI minus the best other method]"
                f"({_link(path, page)})"]  # fmt: skip
    return out


def _part_table(runs: list[RunResults], part: str, page: Path) -> list[str]:
    for run in runs:
        for study in run.studies:
            if study.group == part:
                text = studies.study_markdown(study).splitlines()
                start = next(i for i, line in enumerate(text) if line.startswith("| Task"))
                return [_source_line(run, page), "", *text[start:]]
        rows = [row for row in run.main_rows if row.task == part]
        if rows:
            table = report.markdown_table(run, rows).rstrip("\n").splitlines()
            return [_source_line(run, page), "", *table]
    raise SystemExit(f"make_results: {page}: no study or task {part!r} in its results")


def _source_line(run: RunResults, page: Path) -> str:
    assert run.source is not None
    return f"From [`{run.source.name}`]({_link(run.source, page)})."


def block_body(name: str, options: str, page: Path, root: Path = ROOT) -> str:
    """The generated text of the block ``name`` on ``page`` (relative to ``root``)."""
    set_name, _, part = name.partition("/")
    files = result_sets(root).get(set_name)
    if not files:
        where = (RESULTS / set_name).as_posix()
        return (
            f"*No results yet: put the run's lm-eval results file into `{where}/` and run "
            "`.venv/bin/python scripts/make_results.py`.*\n"
        )
    with _in(root):
        runs = report.load_results([str(f) for f in files])
    if part:
        lines = _part_table(runs, part, page)
    elif "+calibration" in options or "+priors" in options:
        # one table over every run of the set (a suite scored in parts)
        priors = "+priors" in options
        rows = [
            row
            for run in runs
            for row in (
                comparisons.prior_rows(run) if priors else comparisons.calibration_rows(run)
            )
        ]
        if not rows:
            what = "the priors study's reference contexts" if priors else "CC and BC"
            return f"*No task of this set reports {what}.*\n"
        table = comparisons.priors_table(rows) if priors else comparisons.calibration_table(rows)
        used = [
            run
            for run in runs
            if (comparisons.prior_rows(run) if priors else comparisons.calibration_rows(run))
        ]
        if len(used) > 4:  # one results file per task: the folder, not each file
            folder = used[0].source.parent
            lines = [
                f"From the results files in [{folder.as_posix()}]({_link(folder, page)}).",
                "",
                *table,
            ]
        else:
            sources = ", ".join(f"[`{r.source.name}`]({_link(r.source, page)})" for r in used)
            lines = [f"From {sources}.", "", *table]
    else:
        lines = []
        for run, parts in join_parts(runs):
            if run.main_rows:
                table = _run_table(run, page, "+figure" in options, parts)
                lines += ([""] if lines else []) + table
    return "\n".join(lines) + "\n"


def render_page(text: str, page: Path, root: Path = ROOT) -> str:
    """``text`` (the page ``page``, relative to ``root``) with every block regenerated."""

    def replace(match: re.Match[str]) -> str:
        body = block_body(match["name"], match["options"], page, root)
        return match["open"] + body + match["close"]

    return BLOCK.sub(replace, text)


def pages(root: Path = ROOT) -> list[Path]:
    found: list[Path] = []
    for pattern in PAGES:
        found += sorted(p.relative_to(root) for p in root.glob(pattern))
    return found


# ---------------------------------------------------------------- checking


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
    """What is stale: docs/results against a fresh generation, and every page's blocks."""
    found = []
    with tempfile.TemporaryDirectory() as tmp:
        fresh = Path(tmp)
        write_reports(fresh, root)
        committed = root / RESULTS
        have = {p.relative_to(committed) for p in committed.rglob("*") if p.is_file()}
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
    parser.add_argument("--set", dest="set_name", help="the folder under docs/results for --add")
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
                write_json(path, portable_results(read_json(path), args.model_id))
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
