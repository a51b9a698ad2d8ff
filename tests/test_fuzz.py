"""The fuzz tier (marked ``fuzz``): hypothesis mutates genuine runs' files, and ``dcpmi
verify``, ``report``, ``export`` and ``merge`` must each either accept a case with every
number unchanged or refuse it in one line with a non-zero exit status (fuzz_helpers.py says
what the oracle checks, fuzz_mutations.py what is mutated).

The genuine files: the committed full CB run (``results/full``, compact gzipped samples), and
the real runs of ``conftest.shard_runs`` (CB in 3 shards, samples in full), merged here by
``dcpmi merge`` into a merged run. Verify, report and export read a mutated run (committed
or merged); merge reads the 3 shards with one of them mutated.

A third property, on no files and marked ``fast`` too, reads ``--shard slurm``, ``slurm/N``
and ``kubernetes/N`` from generated scheduler variables (``parse_shard``): a shard of the
array, or a one-line refusal naming what is wrong.

CI runs a fixed, small budget (the ``dcpmi-ci`` profile: derandomized, a few dozen cases).
``scripts/fuzz.sh --minutes N`` runs the ``dcpmi-long`` profile: fresh seeds for N minutes
(``DCPMI_FUZZ_SECONDS``), every finding written down (``DCPMI_FUZZ_FINDINGS``) instead of
stopping at the first, and the cases tried counted (``DCPMI_FUZZ_SUMMARY``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from fuzz_helpers import (
    Check,
    CliWorker,
    Outcome,
    changed,
    differences,
    export_numbers,
    optional_claim,
    refusal_problems,
    report_numbers,
    results_claims,
    run_numbers,
    snapshot,
    unblock_fifos,
    written_outside,
)
from fuzz_mutations import (
    ACCEPTED,
    MARKER,
    REFUSED,
    TEMPLATES,
    Mutation,
    bytes_mutation,
    duplicate_key_mutation,
    extra_entry,
    gzip_mutation,
    read_text,
    rename_mutation,
    results_mutation,
    samples_mutation,
    special_mutation,
    template_mutation,
)
from helpers import ROOT, SHARDED_TASK
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from lm_eval_dcpmi.cli._shard_option import ARRAY, INDEX, is_scheduler, parse_shard
from lm_eval_dcpmi.errors import DCPMIError

# the two properties on files read the data (skipped without it); the third needs none
pytestmark = [pytest.mark.fuzz]

settings.register_profile(
    "dcpmi-ci",
    derandomize=True,
    max_examples=int(os.environ.get("DCPMI_FUZZ_EXAMPLES", "100")),
    deadline=timedelta(seconds=150),
    database=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
)
settings.register_profile(
    "dcpmi-long",  # one batch; scripts/fuzz.sh runs batches until its minutes are spent
    parent=settings.get_profile("dcpmi-ci"),
    derandomize=False,
    max_examples=200,
)
PROFILE = os.environ.get("DCPMI_FUZZ_PROFILE", "dcpmi-ci")
LONG = PROFILE != "dcpmi-ci"
SECONDS = float(os.environ.get("DCPMI_FUZZ_SECONDS", "60"))  # per property, long profile
# A command that takes longer hangs: most take well under 2 s; loading a tokenizer that a
# results file names and that is not here fails after ~15 s on 2 busy cores.
CALL_SECONDS = 60
EXPORT_FORMATS = ("eee", "hf", "model-index")
COMMITTED = "results_2026-12-04T01-17-37.593269.json"  # the full CB run

# ---------------------------------------------------------------- the genuine runs


@dataclass
class Base:
    """A genuine run's folder (one results file, one samples file) and what each command
    gives for it."""

    name: str
    folder: Path
    results: str  # its results file's name
    samples: str  # its samples file's name
    numbers: dict[str, dict] = field(default_factory=dict)  # command -> numbers

    @property
    def stamp(self) -> str:
        return self.results.removeprefix("results_").removesuffix(".json")


def _only(folder: Path, pattern: str) -> Path:
    (path,) = folder.rglob(pattern)
    return path


def _base(name: str, results: Path, root: Path) -> Base:
    folder = root / name
    folder.mkdir(parents=True)
    samples = _only(results.parent, f"samples_{SHARDED_TASK}_*")
    shutil.copy(results, folder / results.name)
    shutil.copy(samples, folder / samples.name)
    return Base(name, folder, results.name, samples.name)


@pytest.fixture(scope="session")
def fuzz_space(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


@pytest.fixture(scope="session")
def cli_worker(fuzz_space):
    """One ``dcpmi`` process for every case (its first command loads the tokenizer, the
    task index and the data)."""
    committed = _base("warm-up", ROOT / "results" / "full" / COMMITTED, fuzz_space / "warm")
    worker = CliWorker(warm_up=["verify", str(committed.folder)], cwd=fuzz_space)
    yield worker
    worker.close()


@pytest.fixture(scope="session")
def shard_base(shard_runs, fuzz_space, cli_worker) -> list[Base]:
    """The 3 shards of ``conftest.shard_runs``; the first's ``numbers`` hold the merge's."""
    shards = [
        _base(f"shard{k}", _only(shard_runs[f"{k}of3"], "results_*.json"), fuzz_space / "shards")
        for k in (1, 2, 3)
    ]
    out = fuzz_space / "merged-baseline"
    outcome = cli_worker.call(["merge", *(s.folder for s in shards), "--out", out], fuzz_space, 600)
    assert outcome.status == 0, outcome.err or outcome.error
    shards[0].numbers["merge"] = run_numbers(out)
    return shards


@pytest.fixture(scope="session")
def run_bases(shard_base, fuzz_space, cli_worker) -> list[Base]:
    """The committed CB run and the shards' merged run, with what verify, report and export
    give for each."""
    merged = _only(fuzz_space / "merged-baseline", "results_*.json")
    bases = [
        _base("committed", ROOT / "results" / "full" / COMMITTED, fuzz_space / "bases"),
        _base("merged", merged, fuzz_space / "bases"),
    ]
    for base in bases:
        for command in ("verify", "report", *EXPORT_FORMATS):
            out = fuzz_space / "baselines" / base.name / command
            outcome = cli_worker.call(_argv(command, [base.folder], out), fuzz_space, 600)
            assert outcome.status == 0, (command, outcome.err, outcome.error)
            base.numbers[command] = _numbers(command, [base.folder], out)
        alone = fuzz_space / "baselines" / base.name / "results alone"
        alone.mkdir()
        shutil.copy(base.folder / base.results, alone)
        out = fuzz_space / "baselines" / base.name / "report without samples"
        outcome = cli_worker.call(_argv("report", [alone], out), fuzz_space, 600)
        assert outcome.status == 0, (outcome.err, outcome.error)
        base.numbers["report without samples"] = _numbers("report", [alone], out)
    return bases


def _argv(command: str, inputs: list[Path], out: Path) -> list[Any]:
    if command == "verify":
        return ["verify", *inputs]
    if command == "report":
        return ["report", *inputs, "--out", out, "--format", "csv"]
    if command == "merge":
        return ["merge", *inputs, "--out", out]
    return ["export", *inputs, "--format", command, "--out", out]


def _numbers(command: str, inputs: list[Path], out: Path) -> dict:
    if command == "verify":  # what the results files state: what verify vouches for
        return {k: v for folder in inputs for k, v in results_claims(folder).items()}
    if command == "report":
        return report_numbers(out)
    if command == "merge":
        return run_numbers(out)
    return export_numbers(out)


# ---------------------------------------------------------------- one case


def run_case(
    worker: CliWorker,
    root: Path,
    bases: list[Base],
    target: tuple[int, str],
    mutation: Mutation,
    commands: list[str],
    baseline: dict[str, dict],
) -> list[Check]:
    """Copy ``bases`` into a new case folder, apply ``mutation`` to file ``target`` (a
    base's index and a file name), run each command on it and check each (the oracle, and
    what the mutation ``expect``s: refused, or accepted with every number unchanged)."""
    case = Path(os.path.realpath(root))
    sandbox = case / "a" / "b" / "c"  # room for a few '..' that stay inside the snapshot
    inputs = []
    for base in bases:
        shutil.copytree(base.folder, sandbox / "in" / base.name)
        inputs.append(sandbox / "in" / base.name)
    index, name = target
    mutation.apply(inputs[index], name, sandbox)
    checks = []
    for command in commands:
        out = sandbox / f"out-{command}"
        before = snapshot(case)
        outcome = worker.call(
            _argv(command, inputs, out), sandbox, CALL_SECONDS, lambda: unblock_fifos(case)
        )
        found = refusal_problems(_verb(command), outcome)
        changes = changed(before, snapshot(case))
        ran = [path for path in changes if os.path.basename(path).startswith(MARKER)]
        if ran:
            found.append(f"a template in the files ran code: it made {ran[0]}")
        outside = written_outside(
            [path for path in changes if path not in ran], [os.path.relpath(out, case)]
        )
        if outside:
            found.append(f"wrote outside --out: {', '.join(outside[:3])}")
        if outcome.status == 0 and not found:
            try:
                now = _numbers(command, inputs, out)
            except (OSError, ValueError, RecursionError) as error:
                now, found = {}, [f"accepted, but its output cannot be read: {error!r}"]
            optional = optional_claim if command == "verify" else (lambda key: False)
            wrong = differences(baseline[command], now, optional)
            if wrong and command == "report" and "report without samples" in baseline:
                # a samples file that is not a regular file is not read: the report of the
                # results alone (documented), which must then be the genuine run's
                wrong = wrong if differences(baseline["report without samples"], now) else []
            if wrong and not found:
                found.append("accepted with numbers changed: " + "; ".join(wrong))
        elif outcome.status not in (0, None) and out.exists() and any(out.rglob("*")):
            found.append("refused, but left files in --out")
        if not found and mutation.expect == REFUSED and outcome.status == 0:
            found.append("accepted a file it must refuse")
        if not found and mutation.expect == ACCEPTED and outcome.status != 0:
            reason = next((line for line in outcome.err.splitlines() if line.strip()), "")
            found.append(f"refused a file it must accept: {reason[:300]}")
        checks.append(Check(command, outcome, found))
    return checks


def _verb(command: str) -> str:
    return "export" if command in EXPORT_FORMATS else command


# ---------------------------------------------------------------- the tally


@dataclass
class Tally:
    """Cases tried and findings; in CI the first finding fails the case at once."""

    name: str
    space: Path
    cases: int = 0
    commands: int = 0
    findings: list[dict] = field(default_factory=list)
    start: float = field(default_factory=time.monotonic)

    def out_of_time(self) -> bool:
        return LONG and time.monotonic() - self.start > SECONDS

    def new_case(self) -> Path:
        self.cases += 1
        return self.space / f"{self.name}-{self.cases}"

    def record(self, description: str, checks: list[Check]) -> None:
        self.commands += len(checks)
        for check in checks:
            for problem in check.problems:
                finding = {
                    "property": self.name,
                    "case": description,
                    "command": " ".join(map(str, check.outcome.argv)),
                    "problem": problem,
                    "stderr": check.outcome.err[-600:],
                    "error": (check.outcome.error or "")[-1500:],
                }
                self.findings.append(finding)
                if os.environ.get("DCPMI_FUZZ_FINDINGS"):
                    with open(os.environ["DCPMI_FUZZ_FINDINGS"], "a", encoding="utf-8") as file:
                        file.write(json.dumps(finding) + "\n")
                if not LONG:
                    raise AssertionError(_shown(finding))

    def explore(self, case: Callable[[], None]) -> None:
        """Run the property: once in CI; in batches of fresh seeds until ``SECONDS`` are
        spent under scripts/fuzz.sh. Then say how many cases were tried, and fail on any
        finding."""
        case()
        while LONG and not self.out_of_time():
            case()
        self.finish()

    def finish(self) -> None:
        summary = {
            "property": self.name,
            "cases": self.cases,
            "commands": self.commands,
            "findings": len(self.findings),
            "seconds": round(time.monotonic() - self.start, 1),
        }
        print(f"fuzz: {json.dumps(summary)}")
        if os.environ.get("DCPMI_FUZZ_SUMMARY"):
            with open(os.environ["DCPMI_FUZZ_SUMMARY"], "a", encoding="utf-8") as file:
                file.write(json.dumps(summary) + "\n")
        assert not self.findings, "\n\n".join(_shown(f) for f in self.findings[:20])


def _shown(finding: dict) -> str:
    lines = [
        f"{finding['problem']}",
        f"  case: {finding['case']}",
        f"  $ dcpmi {finding['command']}",
    ]
    if finding["error"]:
        lines.append("  " + finding["error"].strip().replace("\n", "\n  "))
    elif finding["stderr"].strip():
        lines.append("  stderr: " + finding["stderr"].strip().replace("\n", "\n  "))
    return "\n".join(lines)


# ---------------------------------------------------------------- the mutations


@st.composite
def run_mutation(draw: Any, base: Base) -> tuple[str, Mutation]:
    """A mutation of one of the run's two files (or the folder around them)."""
    folder = base.folder
    results_text = read_text(folder / base.results)
    role = draw(st.sampled_from(["results", "samples"]))
    name = base.results if role == "results" else base.samples
    other = base.samples if role == "results" else base.results
    kinds = ["json"] * 6 + ["bytes"] * 2 + ["special", "extra"] + ["duplicate", "template"] * 2
    kind = draw(st.sampled_from(kinds + (["rename"] if role == "results" else ["gzip"] * 2)))
    if kind == "template" and role == "results" and draw(st.integers(0, 3)) == 0:
        mutation = draw(rename_mutation(SHARDED_TASK, base.samples, TEMPLATES))  # as keys too
    elif kind == "template":
        mutation = draw(template_mutation(read_text(folder / name), role == "samples"))
    elif kind == "duplicate":
        mutation = draw(duplicate_key_mutation(read_text(folder / name), role == "samples"))
    elif kind == "gzip":
        mutation = draw(gzip_mutation(read_text(folder / name)))
    elif kind == "json" and role == "results":
        mutation = draw(results_mutation(results_text))
    elif kind == "json":
        mutation = draw(samples_mutation(read_text(folder / base.samples)))
    elif kind == "bytes":
        raw = (folder / name).read_bytes()
        mutation = draw(bytes_mutation(raw, name.endswith(".gz")))
    elif kind == "special":
        mutation = draw(special_mutation(other))
    elif kind == "extra":
        mutation = draw(extra_entry(base.stamp, SHARDED_TASK))
    else:
        mutation = draw(rename_mutation(SHARDED_TASK, base.samples))
    description = f"{base.name} {role}: {mutation.description}"
    return name, Mutation(description, mutation.apply, mutation.expect)


# ---------------------------------------------------------------- the properties


@pytest.mark.usefixtures("data_dir")
def test_a_mutated_run_is_verified_reported_and_exported_unchanged_or_refused(
    run_bases, cli_worker, fuzz_space
):
    tally = Tally("run", fuzz_space)

    @settings(settings.get_profile(PROFILE))
    @given(st.data())
    def case(data):
        base = data.draw(st.sampled_from(run_bases), label="base")
        name, mutation = data.draw(run_mutation(base), label="mutation")
        export_format = data.draw(st.sampled_from(EXPORT_FORMATS), label="export format")
        if tally.out_of_time():
            return
        commands = ["verify", "report", export_format]
        root = tally.new_case()
        try:
            checks = run_case(cli_worker, root, [base], (0, name), mutation, commands, base.numbers)
        finally:
            _remove(root)
        tally.record(mutation.description, checks)

    tally.explore(case)


@pytest.mark.usefixtures("data_dir")
def test_mutated_shards_merge_unchanged_or_are_refused(shard_base, cli_worker, fuzz_space):
    tally = Tally("merge", fuzz_space)

    @settings(settings.get_profile(PROFILE))
    @given(st.data())
    def case(data):
        index = data.draw(st.integers(0, len(shard_base) - 1), label="shard")
        name, mutation = data.draw(run_mutation(shard_base[index]), label="mutation")
        if tally.out_of_time():
            return
        root = tally.new_case()
        try:
            checks = run_case(
                cli_worker,
                root,
                shard_base,
                (index, name),
                mutation,
                ["merge"],
                shard_base[0].numbers,
            )
        finally:
            _remove(root)
        tally.record(mutation.description, checks)

    tally.explore(case)


def _remove(root: Path) -> None:
    if root.exists():
        shutil.rmtree(root)


# ---------------------------------------------------------------- the scheduler's variables

SHARD_EXAMPLES = 2000 if LONG else 500  # microseconds each
SHARD_VALUES = ["slurm", "SLURM", " slurm ", "slurm/8", "slurm / 8", "slurm/1", "slurm/0",
                "slurm/-1", "slurm/¹", "slurm/٣", "slurm/", "slurm/8/2", "slurm/x\ny",
                "slurm\n/x", "slurm\x1c/x", "kubernetes/4", "k8s/3", "K8S/1", "kubernetes",
                "k8s/0", "k8s/ 10", "k8s/1e3", "k8s/9999999999999999999", "1/4", "4/4", "0/4",
                "5/4", "¹/2", " 2 / 3 ", "1/999999999999999999", "1/9999999999999999999",
                "-1/4", "1/-4", "", "/", "slurmy/2"]  # fmt: skip
VARIABLE_VALUES = ["", " 3", "3 ", "¹", "٣", "３", "+3", "-0", "-1", "0x3", "3.0", "1e2", "003",
                   "3\n", "\x00", "0", "999999999999999999", "1000000000000000000",
                   str(2**63), "1" + "0" * 30, "1" * 5000]  # fmt: skip
SCHEDULER_VARIABLES = (*ARRAY, INDEX, "SLURM_JOB_ID")
GENUINE_ARRAY = dict(zip(SCHEDULER_VARIABLES, ["3", "1", "8", "8", "1", "2", "4242"], strict=True))


@st.composite
def scheduler_case(draw: Any) -> tuple[str, dict[str, str]]:
    """``--shard``'s value and a scheduler's variables: those of a genuine array job
    (``--array=MIN-MAX:STEP``, or a list of some of its indices) and Indexed Job, read with
    the N of the array (or near it), then up to 3 of them dropped or made another value (out
    of range, negative, huge, not decimal, not a number at all); or any other value."""
    first, step = draw(st.sampled_from([1, 1, 1, 0, 2, 5])), draw(st.sampled_from([1, 1, 2, 3]))
    indices = draw(st.integers(1, 8))
    last = first + step * (indices - 1)
    tasks = indices if draw(st.booleans()) or indices == 1 else draw(st.integers(2, indices))
    task = first + step * draw(st.integers(0, indices - 1))
    index = draw(st.integers(0, 9))
    values = (task, first, last, tasks, step, index, 4242)
    environ = {name: str(value) for name, value in zip(SCHEDULER_VARIABLES, values, strict=True)}
    for name in draw(st.lists(st.sampled_from(SCHEDULER_VARIABLES), max_size=3, unique=True)):
        other = st.one_of(st.integers(-3, 20).map(str), st.sampled_from(VARIABLE_VALUES))
        if draw(st.booleans()):
            del environ[name]
        else:
            environ[name] = draw(st.one_of(other, st.text(max_size=4)))
    near = draw(st.sampled_from([0, 0, 0, 1, 5, -1]))
    value = draw(
        st.sampled_from(
            [
                "slurm",
                f"slurm/{last + near}",
                f"kubernetes/{index + 1 + near}",
                f"k8s/{index + 1 + near}",
                "any",
            ]
        )
    )
    if value == "any":
        value = draw(
            st.one_of(
                st.sampled_from(SHARD_VALUES),
                st.builds("{}/{}".format, st.integers(-1, 9), st.integers(-1, 9)),
                st.text(max_size=10),
            )
        )
    return value, environ


def _whole(text: str | None) -> bool:
    """A whole number as a scheduler writes it: the digits 0-9 alone."""
    return text is not None and re.fullmatch(r"[0-9]+", text) is not None


def shard_problems(value: str, environ: dict[str, str], shard: Any, documents: int) -> list[str]:
    """What is wrong with the shard ``parse_shard(value, environ=environ)`` gave: K and N
    must be whole numbers with 1 <= K <= N, the ones the value or the array names (K the
    array's ID, on its step, within it; N given, or the array's own, ``1-N``); its document
    indices those of K in 0..documents-1, and with its siblings' each document once."""
    index, count = shard.index, shard.count
    if not (type(index) is int and type(count) is int and 1 <= index <= count):
        return ["accepted as a shard that is not K/N with 1 <= K <= N"]
    problems = []
    indices = shard.indices(documents)
    if indices != list(range(index - 1, documents, count)) or not all(
        0 <= i < documents for i in indices
    ):
        problems.append("its document indices are not K-1, K-1+N, ... below the split's size")
    if count <= 64:
        dealt = sorted(
            i for k in range(1, count + 1) for i in type(shard)(k, count).indices(documents)
        )
        if dealt != list(range(documents)):
            problems.append("the N shards do not hold each document once")
    name, slash, n_text = (part.strip() for part in value.strip().partition("/"))
    if name.lower() in ("kubernetes", "k8s"):
        k = environ.get(INDEX)
        if not (_whole(k) and _whole(n_text) and (index, count) == (int(k) + 1, int(n_text))):
            problems.append(f"accepted: not K = {INDEX} + 1 of the N given")
        elif f"{INDEX}=" not in shard.source:
            problems.append("accepted: its source names no variable")
    elif name.lower() == "slurm":
        array = [environ.get(variable) for variable in ARRAY]
        if not all(map(_whole, array)) or (slash and not _whole(n_text)):
            return [*problems, "accepted a variable or N that is not a whole number"]
        task, first, last, tasks, step = map(int, array)
        n = int(n_text) if slash else tasks
        genuine = (
            step >= 1
            and 1 <= tasks <= (last - first) // step + 1
            and (first == last or tasks >= 2)
            and first <= task <= last
            and (task - first) % step == 0
            and 1 <= first
            and last <= n
            and (slash or (first == 1 and step == 1 and tasks == last))
        )
        if not genuine or (index, count) != (task, n):
            problems.append("accepted: not K = the ID of an array that SLURM could set, of N")
        elif f"{ARRAY[0]}=" not in shard.source:
            problems.append("accepted: its source names no variable")
    else:
        form = re.fullmatch(r"\s*([0-9]+)\s*/\s*([0-9]+)\s*", value)
        if not form or (index, count) != (int(form[1]), int(form[2])):
            problems.append("accepted: not the K/N it spells")
    return problems


def shard_refusal_problems(value: str, message: str) -> list[str]:
    """What is wrong with ``parse_shard``'s refusal: one line, naming the option, and for a
    scheduler's spelling what of it is wrong (a variable, the array, N)."""
    if not message.strip() or "\n" in message or "\r" in message:
        return ["the refusal is not one line"]
    if len(message) > 1000:
        return [f"a refusal of {len(message):,} characters"]
    if not message.startswith("--shard"):
        return ["the refusal does not name --shard"]
    names = (*ARRAY, INDEX, "the array", "N must be")
    if is_scheduler(value) and not any(name in message for name in names):
        return ["the refusal names no variable"]
    return []


@pytest.mark.fast
def test_scheduler_variables_give_a_shard_of_the_array_or_a_one_line_refusal(tmp_path):
    tally = Tally("shard", tmp_path)

    @settings(settings.get_profile(PROFILE), max_examples=SHARD_EXAMPLES, deadline=None)
    @given(scheduler_case(), st.integers(0, 40))
    def case(shard_case, documents):
        value, environ = shard_case
        tally.cases += 1
        outcome = Outcome(["run", "--shard", value], status=0)
        try:
            problems = shard_problems(
                value, environ, parse_shard(value, environ=environ), documents
            )
        except DCPMIError as error:
            outcome.status, outcome.err = 2, str(error)
            problems = shard_refusal_problems(value, str(error))
        except Exception as error:  # noqa: BLE001 - the finding itself
            outcome.status, outcome.error = None, traceback.format_exc()
            problems = [f"traceback: {type(error).__name__}"]
        tally.record(
            f"--shard {value!r} with {environ!r}, {documents} documents",
            [Check("run", outcome, problems)],
        )

    for value in SHARD_VALUES:  # each spelling once, in the array 1-8's third task
        case = example((value, GENUINE_ARRAY), 10)(case)
    case()
    tally.finish()
