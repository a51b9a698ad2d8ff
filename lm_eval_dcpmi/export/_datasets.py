"""Which public dataset each of the paper's 16 tasks scores, for leaderboard entries.

Each row names the Hugging Face Hub dataset (``dataset.id``), its configuration
(``dataset.task_id`` in a Hub ``.eval_results`` entry) and the split that holds the very
documents the task reads from its data file. docs/leaderboards.md shows the table; a
user's own task gets its ids from ``dcpmi export --dataset TASK=ID[:TASK_ID[:SPLIT]]``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Benchmark:
    """The public dataset of a task's documents."""

    name: str  # the dataset's own name, for people
    hub_id: str  # Hub dataset id
    task_id: str  # its configuration (the Hub entry's dataset.task_id)
    split: str  # the split holding the task's documents ("a+b": both, in that order)
    paper: str = "Holtzman et al. 2021 (Surface Form Competition), zero-shot"


BENCHMARKS: dict[str, Benchmark] = {
    "dcpmi_copa": Benchmark("COPA (dev, items 1-500)", "aps/super_glue", "copa",
                            "train+validation"),
    "dcpmi_storycloze": Benchmark("StoryCloze 2016 (test)", "LSDSem/story_cloze", "2016", "test"),
    "dcpmi_hellaswag": Benchmark("HellaSwag (validation)", "Rowan/hellaswag", "default",
                                 "validation"),
    "dcpmi_race_m": Benchmark("RACE middle (test)", "ehovy/race", "middle", "test"),
    "dcpmi_race_h": Benchmark("RACE high (test)", "ehovy/race", "high", "test"),
    "dcpmi_arc_easy": Benchmark("ARC-Easy (test)", "allenai/ai2_arc", "ARC-Easy", "test"),
    "dcpmi_arc_challenge": Benchmark("ARC-Challenge (test)", "allenai/ai2_arc", "ARC-Challenge",
                                     "test"),
    "dcpmi_obqa": Benchmark("OpenBookQA main (test)", "allenai/openbookqa", "main", "test"),
    "dcpmi_cqa": Benchmark("CommonsenseQA (validation)", "tau/commonsense_qa", "default",
                           "validation"),
    "dcpmi_boolq": Benchmark("BoolQ (validation)", "aps/super_glue", "boolq", "validation"),
    "dcpmi_rte": Benchmark("RTE (validation)", "aps/super_glue", "rte", "validation"),
    "dcpmi_cb": Benchmark("CommitmentBank (validation)", "aps/super_glue", "cb", "validation"),
    "dcpmi_sst2": Benchmark("SST-2 (test)", "SetFit/sst2", "default", "test"),
    "dcpmi_sst5": Benchmark("SST-5 (test)", "SetFit/sst5", "default", "test"),
    "dcpmi_agn": Benchmark("AG News (test)", "fancyzhx/ag_news", "default", "test"),
    "dcpmi_trec": Benchmark("TREC coarse (test)", "CogComp/trec", "default", "test"),
}  # fmt: skip


def parse_dataset_option(value: str) -> tuple[str, Benchmark]:
    """``TASK=HUB_ID[:TASK_ID[:SPLIT]]`` (``dcpmi export --dataset``) as (task, Benchmark)."""
    from lm_eval_dcpmi.errors import DCPMIError

    task, equals, spec = value.partition("=")
    parts = spec.split(":")
    if not equals or not task.strip() or not parts[0] or len(parts) > 3 or "/" not in parts[0]:
        raise DCPMIError(
            f"--dataset {value!r}: expected TASK=HUB_ID[:TASK_ID[:SPLIT]], e.g. "
            "my_quiz_dcpmi=my-org/quiz:default:test (HUB_ID: the Hub dataset, developer/name)."
        )
    hub_id = parts[0]
    task_id = parts[1] if len(parts) > 1 and parts[1] else "default"
    split = parts[2] if len(parts) > 2 and parts[2] else "test"
    return task.strip(), Benchmark(hub_id, hub_id, task_id, split, paper="")
