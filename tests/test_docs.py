"""The README and docs/: the committed results are what ``scripts/make_results.py`` makes
from the committed results files, and the pages' links and commands hold.

No model, no lm-eval: the generation reads results JSON files only.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers import ROOT, script
from report_helpers import entry, md_rows, results_dict, ten_document_run

# Every test here needs neither the model nor the data: the fast tier.
pytestmark = pytest.mark.fast

make_results = script("make_results")
pages = script("results_pages")


RESULTS = ROOT / "results"
DOCS = ROOT / "docs"
LIMIT100 = "results/limit100/results_2026-12-04T04-01-44.670979.json"


def block(text: str, name: str, option: str = "") -> str:
    """The body of the block of results set ``name`` (with ``+option``, when given)."""
    options = rf"(?: \+\w+)* \+{option}(?: \+\w+)*" if option else r"(?: \+\w+)*"
    match = re.search(
        rf"<!-- results:{re.escape(name)}{options} -->\n(.*?)<!-- /results:", text, re.S
    )
    assert match is not None, f"no block results:{name}{' +' + option if option else ''}"
    return match.group(1)


@pytest.fixture(scope="module")
def fresh(tmp_path_factory) -> Path:
    """results made again from the committed inputs, in a temporary folder."""
    out = tmp_path_factory.mktemp("results")
    pages.write_reports(out)
    return out


def test_docs_results_are_exactly_the_inputs_and_what_the_command_makes(fresh):
    committed = pages.set_files(RESULTS)
    made = {p.relative_to(fresh) for p in fresh.rglob("*") if p.is_file()}
    inputs = {p for p in committed if pages.is_input(p)}
    assert LIMIT100.removeprefix("results/") in {str(p) for p in inputs}
    assert committed - inputs == made  # no stale or timestamped leftovers, nothing missing
    for path in sorted(made):
        assert make_results.same_file(RESULTS / path, fresh / path), (
            f"results/{path} differs: run .venv/bin/python scripts/make_results.py"
        )
    # The studies are reported as studies of the one model: no summary of "models".
    assert not any(p.name.startswith("summary") for p in made)
    report = (fresh / "limit100" / "report.md").read_text()
    assert f"Source: `{LIMIT100}`" in report
    assert "| dcpmi_obqa | 100 / 500 | 10.0 | 17.0 | 26.0 | 32.0 | **34.0** |" in report


def test_every_results_block_is_what_the_command_makes():
    found = pages.pages()
    assert Path("README.md") in found and Path("docs/studies.md") in found
    for page in found:
        text = (ROOT / page).read_text(encoding="utf-8")
        assert pages.render_page(text, page) == text, (
            f"{page}: stale results block; run .venv/bin/python scripts/make_results.py"
        )


def test_readme_blocks_hold_the_runs_numbers():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    reports = (ROOT / "docs" / "reports.md").read_text(encoding="utf-8")
    data = json.loads((ROOT / LIMIT100).read_text())
    quick = block(reports, "limit100")  # the quick look moved to docs/reports.md
    calibration = block(readme, "full", "calibration")
    assert "| dcpmi_sst2 | 1821 |" in calibration and "| mean (7 tasks) |" in calibration
    rows = md_rows(quick)  # the paper's five methods' columns
    copa = data["results"]["dcpmi_copa"]
    assert rows["dcpmi_copa"] == [
        "100 / 500",
        f"{100 * copa['acc_unc,none']:.1f}",
        f"{100 * copa['acc,none']:.1f}",
        f"**{100 * copa['acc_avg,none']:.1f}**",
        f"{100 * copa['acc_norm,none']:.1f}",
        f"{100 * copa['acc_dcpmi,none']:.1f}",
    ]
    assert rows["dcpmi (mean)"] == ["1556 / 38350", "28.6", "42.5", "44.7", "43.3", "**45.6**"]
    assert "1,556 of 38,350 documents (`--limit 100`)" in quick
    full = block(readme, "full")
    if not (RESULTS / "full").is_dir():
        assert full.startswith("*No results yet: put the run's lm-eval results file into")


def test_adding_a_full_run_is_dropping_its_file_in(tmp_path):
    """The lead's step: a results file into results/full, rerun, and the README's
    full block becomes its table and figure (here: the --limit 100 file, relabelled)."""
    root = tmp_path / "repo"
    (root / "docs").mkdir(parents=True)
    shutil.copy(ROOT / "README.md", root / "README.md")
    shutil.copytree(RESULTS / "limit100", root / "results/limit100")
    data = json.loads((ROOT / LIMIT100).read_text())
    data["config"]["limit"] = None
    data["config"]["model"] = "hf-prefix"
    for counts in data["n-samples"].values():
        counts["original"] = counts["effective"]
    for row in data["results"].values():  # without CC and BC (the last assertion)
        for key in [k for k in row if k.startswith(("acc_cc", "acc_bc"))]:
            del row[key]
    for config in data["configs"].values():  # nor listed, as in a run made without them
        listed = config.get("metric_list", [])
        config["metric_list"] = [m for m in listed if m["metric"] not in ("acc_cc", "acc_bc")]
    full = root / "results/full/results_2026-12-02T00-00-00.json"
    full.parent.mkdir()
    full.write_text(json.dumps(data))
    made = pages.write_reports(root / "results", root)
    assert root / "results/full/figure_SmolLM2-135M-Instruct.Q4_1.png" in made
    text = pages.render_page((root / "README.md").read_text(), Path("README.md"), root)
    new = block(text, "full")
    assert new.startswith(
        "`SmolLM2-135M-Instruct.Q4_1`, lm-eval model `hf-prefix`, 1,556 documents;"
    )
    assert "| dcpmi_cb | 56 | **50.0** | 44.6 | 44.6 | 37.5 | 42.9 |" in new
    assert "![Accuracy per task" in new
    assert "(results/full/figure_SmolLM2-135M-Instruct.Q4_1.png)" in new
    # the CC/BC table reads the same set: this run has neither (removed above)
    assert block(text, "full", "calibration") == "*No task of this set reports CC and BC.*\n"


def test_relative_links_of_readme_and_docs_resolve():
    for page in pages.pages():
        text = (ROOT / page).read_text(encoding="utf-8")
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if target.startswith(("http://", "https://", "#")):
                continue
            path = (ROOT / page).parent / target.split("#")[0]
            assert path.exists(), f"{page}: link to {target}, which does not exist"


def test_readme_opens_with_set_up_demo_and_tests_timed_by_the_record():
    """The first screen's three commands, each executable, and the set-up's and the demo's
    times those of the latest row of the fresh-machine record (benchmarks/fresh_machine.sh)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    first_block = readme.split("```bash\n", 1)[1].split("```", 1)[0]
    lines = first_block.splitlines()
    assert [line.split()[0] for line in lines] == [
        "scripts/setup.sh",
        "scripts/demo.sh",
        "scripts/test.sh",
    ]
    for line in lines:
        assert (ROOT / line.split()[0]).stat().st_mode & 0o111
    latest = json.loads((ROOT / "results/benchmarks/fresh_machine.json").read_text())[-1]
    for line, key in zip(lines, ("setup_s", "demo_s"), strict=False):
        minutes, seconds = divmod(round(latest[key]), 60)
        assert line.rstrip().endswith(f"{minutes} min {seconds:02d} s"), (line, latest)


def test_add_run_keeps_what_the_report_reads_and_drops_the_prompts(tmp_path):
    from lm_eval_dcpmi.report._loading import load_results

    source = ten_document_run(tmp_path / "run")
    copa = source.with_name(f"samples_dcpmi_copa_{make_results_stamp(source)}.jsonl")
    lines = [json.loads(line) for line in copa.read_text().splitlines()]
    for line in lines:  # what lm-eval logs beside the metrics
        line.update(arguments={"gen_args_0": {"arg_0": "a long article", "arg_1": " x"}})
        line.update(resps=[[["-1.5", "False"]]], doc={"premise": "a long article"})
    copa.write_text("".join(json.dumps(line) + "\n" for line in lines))

    root = tmp_path / "project"
    written = make_results.add_run(source, "full", root)
    names = sorted(path.name for path in written)
    stamp = make_results_stamp(source)
    assert names == [
        source.name,
        f"samples_dcpmi_cb_{stamp}.jsonl.gz",
        f"samples_dcpmi_copa_{stamp}.jsonl.gz",
    ]
    (original,) = load_results([source])
    (added,) = load_results([root / "results" / "full" / source.name])
    assert set(added.samples_files) == {"dcpmi_copa", "dcpmi_cb"}
    for mine, theirs in zip(added.rows, original.rows, strict=True):
        assert mine.per_doc == theirs.per_doc and mine.per_doc
    kept = gzip.decompress((root / "results/full" / names[2]).read_bytes()).decode()
    assert "long article" not in kept and json.loads(kept.splitlines()[3])["doc_id"] == 3
    # The same samples give the same bytes (make_results --check compares files).
    again = make_results.add_run(source, "again", root)
    assert again[2].read_bytes() == (root / "results/full" / names[2]).read_bytes()


def make_results_stamp(results_file: Path) -> str:
    return results_file.name.removeprefix("results_").removesuffix(".json")


def test_a_suite_scored_in_parts_is_one_table(tmp_path):
    """results/full holds a model's suite scored in several runs (disjoint tasks):
    its block is one table of all their tasks in paper order, with one mean row."""
    folder = tmp_path / "results" / "full"
    folder.mkdir(parents=True)
    first = {"dcpmi_cb": entry(0.1, 0.2, 0.3, 0.5, n=56, norm=0.2)}
    second = {"dcpmi_copa": entry(0.5, 0.6, 0.6, 0.7, n=500, norm=0.6)}
    for stamp, rows in (("2026-12-01T10-00-00", first), ("2026-12-01T11-00-00", second)):
        (folder / f"results_{stamp}.json").write_text(json.dumps(results_dict(rows, model="m")))
    body = pages.block_body("full", " +figure", Path("README.md"), tmp_path)
    tables = [line for line in body.splitlines() if line.startswith("| Task")]
    assert len(tables) == 1, body
    rows = [line.split("|")[1].strip() for line in body.splitlines() if line.startswith("| ")]
    assert rows == ["Task", "dcpmi_copa", "dcpmi_cb", "*mean (2 tasks)*"]
    mean = next(line for line in body.splitlines() if line.startswith("| *mean"))
    assert "| 30.0 | 40.0 | 45.0 | 40.0 | 60.0 |" in mean  # Unc LM Avg Char DC-PMI
    assert "scored in 2 runs" in body and "results_2026-12-01T10-00-00.json" in body
    assert "![" not in body  # figures are per results file


def documented_commands() -> list[tuple[str, list[str]]]:
    """(page, argv) of every ``dcpmi`` and ``lm_eval`` command of the pages' bash blocks
    (lines joined at a trailing backslash, split at ``&&``; ``$(...)`` as one word)."""
    found = []
    for page in ("README.md", *sorted(p.relative_to(ROOT).as_posix() for p in DOCS.glob("*.md"))):
        text = (ROOT / page).read_text(encoding="utf-8")
        for block in re.findall(r"```bash\n(.*?)```", text, re.S):
            for line in block.replace("\\\n", " ").splitlines():
                line = re.sub(r'"\$\(.*?\)"', "key=SUBSTITUTED", line)
                for command in line.split("&&"):
                    argv = shlex.split(command, comments=True)
                    if argv[:1] in (["dcpmi"], ["lm_eval"]):
                        found.append((page, argv))
    return found


def test_the_documented_commands_are_what_the_parsers_take():
    """A command the README or docs/ show is one ``dcpmi`` and lm-eval accept as written:
    each subcommand's own parser, and for ``dcpmi run`` and ``lm_eval`` the plugin's options
    taken out and the rest read by lm-eval's parser (nothing runs)."""
    from lm_eval_dcpmi.cli import SUBCOMMANDS
    from lm_eval_dcpmi.cli import _lm_eval_options as lm_eval_options
    from lm_eval_dcpmi.cli._run_options import split_run_options

    commands = documented_commands()
    assert len(commands) > 20 and {argv[1] for _page, argv in commands} >= {"run", "verify"}
    for page, argv in commands:
        name = "run" if argv[0] == "lm_eval" else argv[1]
        given = argv[1:] if argv[0] == "lm_eval" else argv[2:]
        (command,) = [c for c in SUBCOMMANDS if c.name == name]
        try:
            if command.raw:
                _options, rest = split_run_options(given, environ={})
                lm_eval_options.read(["run", *rest])
            else:
                parser = argparse.ArgumentParser(prog=f"dcpmi {name}")
                command.add_arguments(parser)
                parser.parse_args(given)
        except SystemExit:
            pytest.fail(f"{page}: {shlex.join(argv)} does not parse")


def test_docs_hold_prose_and_figures_and_the_data_lies_in_results():
    """docs/ is prose (and the figures it shows); run outputs and records are data, under
    results/ (results/README.md says what lies where). No export's output lies around."""
    data = sorted(
        p.relative_to(ROOT).as_posix()
        for p in (ROOT / "docs").rglob("*")
        if p.is_file() and p.suffix in {".json", ".gz", ".csv", ".jsonl"}
    )
    assert data == [], f"data files in docs/, which belong under results/: {data}"
    assert {p.name for p in RESULTS.iterdir() if p.is_dir()} >= {"full", "benchmarks"}
    listed = (RESULTS / "README.md").read_text(encoding="utf-8")
    for folder in sorted(p.name for p in RESULTS.iterdir() if p.is_dir()):
        assert f"  {folder}/ " in listed, f"results/README.md does not say what {folder}/ is"
    outputs = ("out", "sub", "submission")  # the docs' --output_path and export --out
    ignored = (ROOT / ".gitignore").read_text(encoding="utf-8").splitlines()
    assert {f"/{name}/" for name in outputs} <= set(ignored)
    tracked = subprocess.run(["git", "ls-files", *outputs], cwd=ROOT, capture_output=True)
    assert tracked.returncode != 0 or tracked.stdout == b"", tracked.stdout.decode()
