"""``dcpmi export --format model-index``: a model card (``README.md``) whose ``model-index``
front matter ``huggingface_hub`` writes, with every metric of every task and group."""

from __future__ import annotations

from typing import Any

from lm_eval_dcpmi.export._export_options import ExportOptions, benchmark_of
from lm_eval_dcpmi.report import PAPER, Output, text_output
from lm_eval_dcpmi.verification import Submission


def eval_results(submission: Submission, options: ExportOptions) -> list[Any]:
    """``huggingface_hub.EvalResult``s: every metric of every task and group."""
    from huggingface_hub import EvalResult

    found = []
    for task in submission.tasks.values():
        benchmark = None if task.is_group else benchmark_of(task.name, options)
        for metric, value in task.values.items():
            common = {
                "task_type": "multiple-choice",
                "metric_type": metric,
                "metric_value": value,
                "metric_name": f"{task.metric_label(metric)} accuracy"
                + (" (partial)" if task.partial else ""),
                "metric_config": task.name,
            }
            if options.source_url:  # huggingface_hub takes a source's name only with its url
                common.update(source_name="lm-eval-dcpmi", source_url=options.source_url)
            if benchmark is not None:
                found.append(
                    EvalResult(
                        dataset_type=benchmark.hub_id,
                        dataset_name=benchmark.name,
                        dataset_config=benchmark.task_id,
                        dataset_split=benchmark.split,
                        **common,
                    )
                )
            else:
                found.append(
                    EvalResult(
                        dataset_type=f"lm-eval-dcpmi/{task.name}",
                        dataset_name=f"{task.name} (mean over {len(task.subtasks)} tasks)",
                        **common,
                    )
                )
    return found


def write_model_card(submission: Submission, options: ExportOptions) -> list[Output]:
    from huggingface_hub import ModelCard, ModelCardData

    assert submission.model.id is not None
    data = ModelCardData(
        model_name=submission.model.id, eval_results=eval_results(submission, options)
    )
    body = (
        f"# {submission.model.id}\n\nZero-shot multiple-choice accuracies scored with "
        f"[lm-eval-dcpmi](https://pypi.org/project/lm-eval-dcpmi/) "
        f"{submission.plugin_version or ''} on lm-eval "
        f"{submission.data.get('lm_eval_version') or ''}: DC-PMI ({PAPER}) beside the usual "
        "scores, from one set of requests.\n"
    )
    card = ModelCard(f"---\n{data.to_yaml()}\n---\n\n{body}")
    return [text_output(options.out / "README.md", str(card))]
