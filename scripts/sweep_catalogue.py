"""Write results/catalogue/sweep_lm-eval-<version>.{json,md}: ``dcpmi run --dcpmi_task
TASK`` on every multiple-choice task of the installed lm-eval's index, from its config
alone (``lm_eval_dcpmi.task._catalogue``): how many are ready, refused (and why) or an
error (a fault of the plugin's: there must be none). tests/test_catalogue.py runs the
sweep again and compares it with the record of the lm-eval it runs under.

    .venv/bin/python scripts/sweep_catalogue.py           # (re)write the record
    .venv/bin/python scripts/sweep_catalogue.py --check   # exit 1 if it differs
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from lm_eval_dcpmi.task._catalogue import markdown, record_name, sweep

OUT = Path(__file__).resolve().parents[1] / "results" / "catalogue"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=OUT, help=f"folder (default {OUT})")
    parser.add_argument("--check", action="store_true", help="compare, do not write")
    args = parser.parse_args(argv)
    result = sweep()
    counts = result.counts()
    path = args.out / f"{record_name(result.lm_eval_version)}.json"
    line = (
        f"{counts['multiple_choice']} multiple-choice tasks in {result.seconds:.0f} s: "
        + ", ".join(f"{v['count']} {k}" for k, v in counts["by_status"].items())
    )
    if args.check:
        recorded = (
            json.loads(path.read_text(encoding="utf-8"))["counts"] if path.is_file() else None
        )
        same = recorded == counts
        print(f"{line}; {path}: {'the same' if same else 'differs' if recorded else 'none'}")
        return 0 if same else 1
    args.out.mkdir(parents=True, exist_ok=True)
    # messages name files in site-packages: the record names them from there on
    import lm_eval

    found = Path(lm_eval.__file__)  # .venv may be a link: its path and the real one
    packages = {f"{found.parents[1]}/", f"{found.resolve().parents[1]}/"}
    refusals = {}
    for outcome in result.outcomes:
        if outcome.status != "ready":
            refusals[outcome.task] = outcome.message
            for folder in packages:
                refusals[outcome.task] = refusals[outcome.task].replace(folder, "")
    record = {"seconds": round(result.seconds, 1), "counts": counts, "not_ready": refusals}
    path.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    path.with_suffix(".md").write_text(markdown(counts, result.seconds), encoding="utf-8")
    print(f"{line}; wrote {path} and its .md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
