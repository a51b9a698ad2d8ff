"""The priors study (``dcpmi_priors``) on N evenly spread documents of each task, with the
requests the full-split runs answered taken from them, not scored again.

    DCPMI_DATA_DIR=../shared/data .venv/bin/python scripts/priors_study.py \\
        --documents 1000 --folder out/priors --commit

Each ``dcpmi_priors_<task>`` scores its task's own requests (the conditional ones, the
domain premise's, CC's content-free ones) plus one request per option for each of three
other priors. The first are answered in the committed full-split run of ``dcpmi_<task>``
(``results/full``), whose compact samples keep every request's loglikelihood and
is-greedy flag but no prompt. So, per task:

1. **Answers** (``answer_cache``): the full run's requests of the chosen documents are
   built again from the data, as ``dcpmi verify`` builds them (``rebuild_task``), and
   checked as it checks them: the data files' digests, the premise recorded, each
   document's per-document accuracies recomputed from the logged loglikelihoods on the
   rebuilt requests. Then each request's answer goes into lm-eval's answer cache, one
   per task (``--use_cache FOLDER/answers/<task>``: ``<task>_rank0.db``, keyed by
   ``lm_eval.api.model.hash_args``; two tasks' runs may answer one request a few ulps
   apart), with the plugin's record of the model beside it.
2. **Scoring**: ``dcpmi run --model hf-prefix --tasks dcpmi_priors_<task> --quick N
   --use_cache FOLDER/answers/<task> --log_samples``, into ``FOLDER/runs/<task>`` (a run is
   written beside it and renamed when it ends well: a task already there is skipped, so
   the same command resumes). ``--quick N`` picks the documents step 1 picked
   (``task._quick_look.spread_indices``; every document of a smaller split).
3. **Check**: every request of the run that step 1 answered logs that very answer (the
   run took it from the cache), and every one of them was asked.
4. ``--commit``: ``results/priors`` is replaced by these runs (``make_results.add_run``),
   its pages made again (``make_results.py``), and ``dcpmi verify results/priors`` run.

``--estimate``: steps 1 only, then the requests the runs will score and their tokens
(context tokens of each distinct context, continuation tokens of each distinct request:
what ``hf-prefix`` forwards, about) and the time at ``--rate`` tokens/s.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from make_results import add_run
from results_pages import ROOT
from score_parts import run_child

from lm_eval_dcpmi import _paper as paper
from lm_eval_dcpmi._harness._answer_cache import CACHE_OWNER_SUFFIX, cache_owner
from lm_eval_dcpmi.cli._lm_eval_options import embedded_model_args
from lm_eval_dcpmi.task._quick_look import spread_indices
from lm_eval_dcpmi.verification._against_data import (
    data_findings,
    document_findings,
    premise_findings,
)
from lm_eval_dcpmi.verification._rebuild import build_options, rebuild_task
from lm_eval_dcpmi.verification._recompute import TokenCounts, score_documents, task_samples
from lm_eval_dcpmi.verification._submission import read_submission, results_files

DCPMI = str(Path(sys.executable).with_name("dcpmi"))
FULL = ROOT / "results" / "full"
PRIORS = ROOT / "results" / "priors"
MODEL = "hf-prefix"
# benchmarks' hf-prefix rate on 2 idle AMD EPYC cores (docs/performance.md, facts)
RATE = 346.0


def priors_name(task: str) -> str:
    """``copa``, ``dcpmi_copa`` or ``dcpmi_priors_copa`` -> ``dcpmi_priors_copa``."""
    short = task.removeprefix("dcpmi_priors_").removeprefix("dcpmi_")
    return f"dcpmi_priors_{short}"


def full_run(task: str) -> Path:
    """The committed full-split results file of ``task`` (``dcpmi_<x>``)."""
    for path in results_files([FULL]):
        if task in (json.loads(path.read_text()).get("results") or {}):
            return path
    raise SystemExit(f"priors_study: no results file in {FULL} holds {task}.")


def answers(task: str, count: int) -> tuple[list[int], dict[tuple[str, str], list[Any]]]:
    """The documents chosen of ``task`` (``dcpmi_<x>``) and, per request of its full run on
    them, built again from the data and checked as ``dcpmi verify`` checks, its answer
    ``[loglikelihood, is_greedy]``."""
    submission = read_submission(full_run(task))
    entry = submission.tasks[task]
    if entry.samples_file is None or entry.n != entry.n_total:
        raise SystemExit(
            f"priors_study: {submission.path} ({task}) is no whole split with samples."
        )
    where = f"{entry.samples_file} ({task})"
    logged = {int(s["doc_id"]): s for s in task_samples(entry.samples_file, where)}
    chosen = spread_indices(entry.n_total, count)
    counts = TokenCounts(submission, None)
    options = build_options(submission.data, task, lambda: counts.counter().tokenizer)
    rebuilt = rebuild_task(task, submission.tokenizer_args(None), options, chosen, None, (),
                           entry.metadata)  # fmt: skip
    samples = [logged[i] for i in chosen]
    findings = data_findings(entry, rebuilt, where) + premise_findings(entry, rebuilt, where)
    findings += document_findings(samples, rebuilt, where)
    built = [rebuilt.by_id[i] for i in chosen]
    with_requests = [{**s, "arguments": d.arguments} for s, d in zip(samples, built, strict=True)]
    short = [d.doc_id for s, d in zip(samples, built, strict=True)
             if len(d.arguments) != len(s["filtered_resps"])]  # fmt: skip
    if not short:
        _scored, differences = score_documents(
            entry, with_requests, counts, where,
            golds={d.doc_id: d.gold for d in built},
            characters={d.doc_id: [len(c) for c in d.choices] for d in built},
        )  # fmt: skip
        findings += differences
    if findings or short:
        lines = [str(f) for f in findings[:10]] + [
            f"{where}: doc {i}: requests differ" for i in short
        ]
        raise SystemExit("priors_study: the full run's answers do not check:\n" + "\n".join(lines))
    found: dict[tuple[str, str], list[Any]] = {}
    for sample in with_requests:
        for pair, answer in zip(sample["arguments"], sample["filtered_resps"], strict=True):
            pair = (str(pair[0]), str(pair[1]))
            ll, greedy = float(answer[0]), answer[1] in (True, "True", "true", 1, "1")
            if pair in found and found[pair][0] != ll:  # one request, two answers
                raise SystemExit(
                    f"priors_study: {where}: the request {pair!r} has the answers "
                    f"{found[pair][0]!r} and {ll!r}; one cache entry cannot hold both."
                )
            found[pair] = [ll, greedy]
    return chosen, found


def write_cache(prefix: Path, found: dict[tuple[str, str], list[Any]]) -> int:
    """The answers into lm-eval's cache ``PREFIX_rank0.db`` (read back and compared), and
    the model's record beside it; returns how many entries it holds."""
    from lm_eval.api.model import hash_args
    from sqlitedict import SqliteDict

    prefix.parent.mkdir(parents=True, exist_ok=True)
    record = Path(f"{prefix}{CACHE_OWNER_SUFFIX}")
    owner = cache_owner(MODEL, embedded_model_args())
    if record.is_file() and json.loads(record.read_text()) != owner:
        raise SystemExit(f"priors_study: {record} names another model; use another --folder.")
    record.write_text(json.dumps(owner, indent=2) + "\n", encoding="utf-8")
    keys = {hash_args("loglikelihood", pair): (ll, greedy) for pair, (ll, greedy) in found.items()}
    with SqliteDict(f"{prefix}_rank0.db", autocommit=False) as cache:
        for key, answer in keys.items():
            if key in cache and tuple(cache[key]) != answer:
                raise SystemExit(f"priors_study: {prefix}_rank0.db holds another answer.")
            cache[key] = answer
        cache.commit()
    with SqliteDict(f"{prefix}_rank0.db", flag="r") as cache:
        if any(tuple(cache[key]) != answer for key, answer in keys.items()):
            raise SystemExit(f"priors_study: {prefix}_rank0.db does not read back as written.")
        return len(cache)


def run_task(name: str, count: int, folder: Path) -> Path:
    """``dcpmi run`` of ``name`` into ``folder/runs/<name>`` (skipped when there)."""
    target = folder / "runs" / name
    if target.is_dir():
        return target
    temporary = target.with_name(name + ".running")
    shutil.rmtree(temporary, ignore_errors=True)
    command = [DCPMI, "run", "--model", MODEL, "--tasks", name, "--quick", str(count),
               "--use_cache", str(folder / "answers" / name), "--log_samples",
               "--output_path", str(temporary)]  # fmt: skip
    started = time.monotonic()
    status = run_child(command, temporary)
    if status != 0:
        raise SystemExit(f"priors_study: {' '.join(command)} failed (exit {status}).")
    temporary.rename(target)
    print(f"priors_study: {name} scored in {time.monotonic() - started:.0f} s -> {target}")
    return target


def check_run(name: str, run: Path, found: dict[tuple[str, str], list[Any]]) -> None:
    """Every request the full run answered logs that answer in ``run``, and each was asked."""
    (samples,) = run.rglob(f"samples_{name}_*.jsonl")
    asked: set[tuple[str, str]] = set()
    for line in samples.read_text(encoding="utf-8").splitlines():
        sample = json.loads(line)
        arguments = sample["arguments"].values()
        for args, answer in zip(arguments, sample["filtered_resps"], strict=True):
            pair = (args["arg_0"], args["arg_1"])
            if pair in found:
                asked.add(pair)
                if float(answer[0]) != found[pair][0]:
                    raise SystemExit(
                        f"priors_study: {samples} doc {sample['doc_id']}: {float(answer[0])!r} "
                        f"for a request the full run answered {found[pair][0]!r}: not from "
                        "the cache."
                    )
    if len(asked) != len(found):
        raise SystemExit(
            f"priors_study: {name}: {len(found) - len(asked)} cached requests unasked."
        )


def estimate(name: str, chosen: list[int], found: dict[tuple[str, str], list[Any]]) -> int:
    """Tokens ``hf-prefix`` forwards for the requests of ``name`` not in ``found``."""
    from lm_eval_dcpmi import embedded
    from lm_eval_dcpmi.task._tokens import counter_for_metadata

    args = embedded.model_args()
    rebuilt = rebuild_task(name, args, build_options({}, name, lambda: None), chosen)
    counter = counter_for_metadata(args)
    new = {tuple(a) for d in rebuilt.by_id.values() for a in d.arguments} - set(found)
    contexts = {c: counter.split(c, "x")[0] for c, _ in new}
    return sum(contexts.values()) + sum(counter.split(c, o)[1] for c, o in new)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--documents", type=int, default=1000, help="per task (default 1000)")
    parser.add_argument("--folder", type=Path, required=True, help="answers and runs go here")
    parser.add_argument("--tasks", help="comma list (copa,sst2; default: the 16)")
    parser.add_argument("--estimate", action="store_true", help="cache, then count; score none")
    parser.add_argument("--rate", type=float, default=RATE, help="tokens/s for --estimate")
    parser.add_argument("--commit", action="store_true", help="replace results/priors")
    args = parser.parse_args(argv)
    if args.commit and args.tasks:
        parser.error("--commit replaces the whole study: give no --tasks")
    names = [priors_name(t) for t in args.tasks.split(",")] if args.tasks else [
        priors_name(t) for t in paper.paper_order()]  # fmt: skip
    total = 0
    runs = []
    for name in names:
        task = name.replace("dcpmi_priors_", "dcpmi_")
        chosen, found = answers(task, args.documents)
        held = write_cache(args.folder / "answers" / name, found)
        print(f"priors_study: {task}: {len(found)} answers of {len(chosen)} documents checked "
              f"and cached ({held} in the cache)")  # fmt: skip
        if args.estimate:
            tokens = estimate(name, chosen, found)
            total += tokens
            print(f"priors_study: {name}: {tokens} new tokens, {tokens / args.rate / 60:.1f} min")
            continue
        run = run_task(name, args.documents, args.folder)
        check_run(name, run, found)
        print(f"priors_study: {name}: every cached answer was taken from the cache")
        runs.append((name, run))
    if args.estimate:
        hours = total / args.rate / 3600
        print(f"priors_study: {total} new tokens in all: {hours:.2f} h at {args.rate:g} tokens/s")
        return 0
    return commit([run for _name, run in runs]) if args.commit else 0


def commit(runs: list[Path]) -> int:
    """``results/priors`` made of ``runs`` (their results files and samples, compacted),
    its pages made again, and ``dcpmi verify`` on it: its exit status."""
    for old in [*PRIORS.glob("results_*.json"), *PRIORS.glob("samples_*.jsonl.gz")]:
        old.unlink()
    for run in runs:
        (results,) = run.rglob("results_*.json")
        add_run(results, PRIORS.name, ROOT)
    subprocess.run([sys.executable, str(ROOT / "scripts" / "make_results.py")], check=True)
    return subprocess.call([DCPMI, "verify", str(PRIORS)])


if __name__ == "__main__":
    raise SystemExit(main())
