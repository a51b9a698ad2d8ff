"""Add the measures (PMA: ``rules._scoring.MEASURES``) to committed results written before the
plugin reported them, from their own logged loglikelihoods: no document is scored again.

    DCPMI_DATA_DIR=../shared/data .venv/bin/python scripts/add_measures.py results/full

For each results file of the folders given: ``dcpmi verify``'s checks first (every document
and request rebuilt from the data, every metric recomputed; any difference stops the script
before anything is written), then each task's compact samples get each document's measures,
as the task itself logs them, and the results file each measure's mean and standard error
(lm-eval's ``mean`` and ``mean_stderr``) and its direction (none: ``higher_is_better``
null). A file that already reports them is left as it is. Afterwards
``dcpmi verify`` checks the added values like any others, and ``scripts/make_results.py``
writes the pages again.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from make_results import write_samples_gz

from lm_eval_dcpmi._json_files import read_json, write_json
from lm_eval_dcpmi.report._samples import read_samples
from lm_eval_dcpmi.rules import _scoring as scoring
from lm_eval_dcpmi.verification._recompute import mean_stderr
from lm_eval_dcpmi.verification._submission import read_submission, results_files
from lm_eval_dcpmi.verification._verify import VerifyOptions, verify_submission


def add_measures(results_file: Path, data_dir: str | None = None) -> list[Path]:
    """Add the measures to one results file and its samples files; returns those written."""
    submission = read_submission(results_file)
    data = read_json(results_file)
    missing = [
        name
        for name, task in submission.tasks.items()
        if not task.is_group
        and any(f"{m},none" not in data["results"][name] for m in scoring.MEASURES)
    ]
    if not missing:
        return []
    checked, findings = verify_submission(submission, VerifyOptions(data_dir=data_dir))
    if findings:
        lines = "\n".join(f"  {f.where}: {f.what}" for f in findings[:10])
        raise SystemExit(
            f"{results_file}: dcpmi verify finds differences; nothing written:\n{lines}"
        )
    written = []
    for name in missing:
        task = submission.tasks[name]
        per_document = checked.per_document[name]
        samples_file = task.samples_file
        assert samples_file is not None and samples_file.suffix == ".gz", samples_file
        samples = read_samples(samples_file)
        for sample in samples:
            values = per_document[int(sample["doc_id"])]
            sample.update({m: values[m] for m in scoring.MEASURES})
        write_samples_gz(samples_file, samples)
        written.append(samples_file)
        ordered = [per_document[doc_id] for doc_id in sorted(per_document)]
        entry = data["results"][name]
        for measure in scoring.MEASURES:
            values = [document[measure] for document in ordered]
            entry[f"{measure},none"] = sum(values) / len(values)  # lm-eval's mean
            entry[f"{measure}_stderr,none"] = mean_stderr(values)
            data.setdefault("higher_is_better", {}).setdefault(name, {})[measure] = (
                scoring.METRIC_BY_NAME[measure].higher_is_better
            )
    write_json(results_file, data)
    return [results_file, *written]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+", type=Path)
    parser.add_argument("--data_dir", default=None, help="default: $DCPMI_DATA_DIR")
    args = parser.parse_args(argv)
    for results_file in results_files(args.folders):
        written = add_measures(results_file, args.data_dir)
        done = f"added to {len(written)} files" if written else "has them already"
        print(f"{results_file}: {done}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
