"""A new scoring rule is one row of the metrics table (``rules/_scoring.py``): shown on a
throwaway one, added to a copy of the project, which the table's every view, lm-eval's
registry, a task's scores, the report and the copy's own fast tier take up from the row
alone. Not in the fast tier itself: it runs the fast tier."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from helpers import PROJECT, changed_files, copy_project, fast_tier_in_copy, run_in_copy

from lm_eval_dcpmi.report import _looks as looks
from lm_eval_dcpmi.rules import _scoring as scoring

HALVED_ROW = """\
    Metric(name="acc_halved", rule="log P(y | premise) - log P(y | domain premise) / 2",
           score=lambda d: [c - p / 2 for c, p in zip(d.conditional, d.references[DOMAIN])]),
"""

# Run in a copy of the package with the row added: every view of the table, lm-eval's
# registry, a task's scores and the report must take the rule up from the row alone.
HALVED_CHECK = """
import json, sys
sys.path.insert(0, sys.argv[1])  # the tests' helpers
from helpers import make_task

from lm_eval_dcpmi.rules import _scoring as scoring
from lm_eval_dcpmi.rules._registry import dcpmi_metric_list
from lm_eval_dcpmi._harness._metrics import registered_metric
from lm_eval_dcpmi.report import _looks as looks, _results as results

docs = [
    {"question": "Q1", "options": ["a", "b", "c"], "gold": 1},
    {"question": "Q2", "options": ["a", "b"], "gold": 0},
]
# per document: log P(option | premise), then log P(option | domain premise)
answers = {0: [-1.0, -1.5, -6.0, -1.0, -3.0, -8.0], 1: [-2.0, -1.0, -1.0, -1.0]}
task = make_task(docs)
task.build_all_requests(limit=None, rank=0, world_size=1)
per_doc = []
for doc_id, doc in enumerate(docs):
    per_doc.append(task.process_results(doc, [(ll, False) for ll in answers[doc_id]]))
aggregate, higher = registered_metric("acc_halved")
print(json.dumps({
    "accuracies": scoring.ACCURACIES,
    "task": [m.name for m in task.metrics],
    "metric_list": [e["metric"] for e in dcpmi_metric_list([])],
    "registry": [aggregate([1.0, 0.0]), higher],
    "documents": [{k: d[k] for k in ("acc", "acc_dcpmi", "acc_halved")} for d in per_doc],
    "task_mean": task.aggregation()["acc_halved"]([d["acc_halved"] for d in per_doc]),
    "report": [
        results.METHODS, looks.metric_label("acc_halved"), looks.metric_look("acc_halved").colour
    ],
    "per_document": results.per_document(
        [{"doc_id": i, "filter": "none", **d} for i, d in enumerate(per_doc)]
    )["acc_halved"],
    "group": scoring.GROUP_METRICS,
}))
"""


def test_a_throwaway_rule_is_one_row(tmp_path):
    copy = copy_project(tmp_path, PROJECT)
    table = copy / "lm_eval_dcpmi" / "rules" / "_scoring.py"
    text = table.read_text(encoding="utf-8")
    anchor = '    Metric(name="truncated"'
    assert text.count(anchor) == 1
    table.write_text(text.replace(anchor, HALVED_ROW + anchor), encoding="utf-8")
    assert changed_files(copy) == ["lm_eval_dcpmi/rules/_scoring.py"]  # the one file it needed

    found = run_in_copy(copy, HALVED_CHECK)
    assert found["accuracies"] == [*scoring.ACCURACIES, "acc_halved"]
    later = [*scoring.MEASURES, *scoring.COUNTS]  # accuracies first, then measures and counts
    assert found["task"] == [*scoring.ACCURACIES, "acc_halved", *later]
    assert found["metric_list"][-1 - len(later) :] == ["acc_halved", *later]
    assert found["registry"] == [0.5, True]  # the mean, higher is better
    # Document 1: LM -1 > -1.5 > -6 picks a; DC-PMI 0, 1.5, 2 picks c; halved
    # -0.5, 0, -2 picks b (gold). Document 2: LM and DC-PMI (-1, 0) pick b; halved
    # (-1.5, -0.5) picks b; gold a.
    assert found["documents"] == [
        {"acc": 0.0, "acc_dcpmi": 0.0, "acc_halved": 1.0},
        {"acc": 0.0, "acc_dcpmi": 0.0, "acc_halved": 0.0},
    ]
    assert found["task_mean"] == 0.5
    # the report shows it as a sixth column, by its name, in grey; groups leave it out
    assert found["report"] == [[*scoring.ACCURACIES, "acc_halved"], "acc_halved", looks.GREY]
    assert found["per_document"] == [1.0, 0.0]
    assert found["group"] == list(scoring.GROUP_METRICS)
    # and the suite itself agrees: with the committed pages made again (the report has a
    # column more: scripts/make_results.py writes them, nobody edits them), the fast tier
    # passes in the copy (every test of the table, the registry, the reports and the docs)
    made = regenerated_pages(copy)
    assert "README.md" in made
    assert [f for f in changed_files(copy) if f not in made] == ["lm_eval_dcpmi/rules/_scoring.py"]
    fast_tier_in_copy(copy)


def regenerated_pages(project: Path) -> set[str]:
    """The files ``scripts/make_results.py`` rewrites in ``project`` (its printed paths)."""
    done = subprocess.run(
        [sys.executable, "scripts/make_results.py"],
        capture_output=True, text=True, cwd=project, check=False,
        env={**os.environ, "PYTHONPATH": str(project)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return {line.split(" ", 1)[1] for line in done.stdout.splitlines() if " " in line}
