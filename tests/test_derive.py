"""DC-PMI on a registered task named by `base_task` (derive.py), and the ready-made
variants of lm-eval's own multiple-choice tasks (task_configs/lm_eval/).

lm-eval's tasks download their data from the Hugging Face hub, which tests cannot
reach: ``datasets.load_dataset`` is replaced by a few rows shaped like each dataset, and
the tasks load and render through the real TaskManager and the real YAML configs.
"""

from __future__ import annotations

from pathlib import Path

import datasets
import pytest
import yaml
from helpers import LM_EVAL_05, ROOT, bare, request_pairs, tasks_by_name, write_quiz_task

from lm_eval_dcpmi import task_configs_dir
from lm_eval_dcpmi._harness._index import task_index
from lm_eval_dcpmi.errors import DCPMIConfigError
from lm_eval_dcpmi.task._dcpmi_task import DCPMITask
from lm_eval_dcpmi.task._derive import with_base_task

READY_MADE = task_configs_dir() / "lm_eval"

# ------------------------------------------------------------------ a user's own task

QUIZ_ROWS = [
    {"question": "What colour is fresh snow?", "choices": ["white", "black"], "label": 0},
    {"question": "Which animal barks?", "choices": ["a cat", "a dog"], "label": 1},
]
QUIZ = {
    "tag": "my_quizzes",
    "task_alias": "Quiz",
    "doc_to_text": "Q: {{question}}\nA:",
    "doc_to_choice": "{{choices}}",
    "doc_to_target": "label",
    "target_delimiter": " => ",
    "metadata": {"version": 3},
}
QUIZ_GROUP_YAML = "group: quiz_group\ntask: [quiz]\n"
QUIZ_DCPMI_YAML = """\
task: quiz_dcpmi
base_task: quiz
class: !function lm_eval_dcpmi.task.DCPMITask
domain_premise: "A:"
"""


@pytest.fixture(scope="module")
def user_tasks(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("user_tasks")
    write_quiz_task(folder, "quiz", QUIZ_ROWS, **QUIZ)
    (folder / "quiz_group.yaml").write_text(QUIZ_GROUP_YAML)
    (folder / "quiz_dcpmi.yaml").write_text(QUIZ_DCPMI_YAML)
    return folder


@pytest.fixture(scope="module")
def user_manager(user_tasks):
    from lm_eval.tasks import TaskManager

    return TaskManager(include_path=str(user_tasks))


def derive(user_tasks: Path, base: str, source: str = "quiz_dcpmi.yaml", **keys) -> dict:
    """``with_base_task`` on the config lm-eval hands ``DCPMITask`` for the derived YAML
    ``source`` of ``user_tasks`` (which the ``user_manager`` fixture indexed)."""
    config = {
        "task": "quiz_dcpmi",
        "base_task": base,
        "domain_premise": "A:",
        "metadata": {"config_source": str(user_tasks / source)},
        **keys,
    }
    return with_base_task(config, DCPMITask)


def test_derived_keys_over_the_base_config(user_manager, user_tasks):
    merged = derive(user_tasks, "quiz", target_delimiter=" -> ")
    assert merged == {
        # the base's config, resolved from its file...
        "task": "quiz_dcpmi",
        "dataset_path": "json",
        "dataset_kwargs": {"data_files": {"test": str(user_tasks / "quiz.jsonl")}},
        "test_split": "test",
        "output_type": "multiple_choice",
        "doc_to_text": "Q: {{question}}\nA:",
        "doc_to_choice": "{{choices}}",
        "doc_to_target": "label",
        # ...with the derived keys winning, its tag and alias dropped, metadata merged
        "target_delimiter": " -> ",
        "domain_premise": "A:",
        "metadata": {
            "version": 3,
            "config_source": str(user_tasks / "quiz_dcpmi.yaml"),
            "base_task": "quiz",
        },
    }


def test_a_dcpmi_task_can_be_a_base(user_manager, user_tasks):
    merged = derive(user_tasks, "dcpmi_copa", task="copa_again", domain_premise=" so")
    assert merged["domain_premise"] == " so"
    assert merged["target_delimiter"] == ""  # from the paper task's template
    assert "class" not in merged and "tag" not in merged


@pytest.mark.parametrize(
    ("base", "keys", "message"),
    [
        ("quizz", {}, "base task 'quizz' is not a registered task"),
        ("arc_esy", {}, "Did you mean: arc_easy"),
        ("quiz_group", {}, "'quiz_group' is a group, not one task; derive each of its tasks"),
        ("ai2_arc", {}, "'ai2_arc' is a tag, not one task"),
        ("gsm8k", {}, "/gsm8k.yaml) has `output_type: generate_until`; DC-PMI scores the"),
        ("squadv2", {}, "is the Python task class 'SQuAD2'"),
        ("quiz", {"domain_premise": ""}, "DC-PMI needs a non-empty domain premise"),
        ("quiz", {"domain_premise": None}, "DC-PMI needs a non-empty domain premise"),
        ("", {}, "`base_task` must name a registered task"),
        (
            "quiz_dcpmi",
            {},
            "`base_task: quiz_dcpmi` names this task itself; name the "
            "registered task it is a DC-PMI variant of (e.g. `base_task: quiz` for",
        ),
        # the derived YAML's own output_type is blamed on the derived YAML, not the base
        (
            "quiz",
            {"output_type": "generate_until"},
            "`output_type: generate_until` is set here, over the base task 'quiz'; DC-PMI "
            "scores the options of a `multiple_choice` task: remove the line",
        ),
    ],
)
def test_bad_base_tasks_are_refused_naming_the_yaml_at_fault(
    user_manager, user_tasks, base, keys, message
):
    with pytest.raises(DCPMIConfigError) as error:
        derive(user_tasks, base, **keys)
    assert str(error.value).startswith(f"task quiz_dcpmi ({user_tasks / 'quiz_dcpmi.yaml'}): ")
    assert message in str(error.value)


def test_unknown_base_lists_what_was_searched(user_manager, user_tasks):
    with pytest.raises(DCPMIConfigError, match=f"searched lm-eval's tasks and .*{user_tasks}"):
        derive(user_tasks, "quizz")


def test_a_config_no_task_manager_indexed_searches_a_new_one(user_manager, user_tasks):
    """A derived config given as a dict (or with the autoload hook off) is in no index the
    plugin saw: its base is looked up among what a new TaskManager knows, and the message
    says that the user's --include_path was not searched."""
    assert derive(user_tasks, "arc_easy", source="not_indexed.yaml")["dataset_path"] == (
        "allenai/ai2_arc"
    )
    with pytest.raises(DCPMIConfigError) as error:
        derive(user_tasks, "quiz", source="not_indexed.yaml")
    assert "base task 'quiz' is not a registered task (searched only what a new " in str(
        error.value
    )
    assert "so --include_path was not searched" in str(error.value)


def test_base_and_variant_load_side_by_side(user_manager):
    loaded = user_manager.load(["quiz", "quiz_dcpmi"])["tasks"]
    base, variant = loaded["quiz"], loaded["quiz_dcpmi"]
    base_pairs = request_pairs(base, 2)
    variant_pairs = request_pairs(variant, 2)
    assert base_pairs[0] == [
        ("Q: What colour is fresh snow?\nA:", " => white"),
        ("Q: What colour is fresh snow?\nA:", " => black"),
    ]
    for base_doc, variant_doc in zip(base_pairs, variant_pairs, strict=True):
        assert variant_doc == base_doc + [("A:", continuation) for _, continuation in base_doc]


# ------------------------------------------------------------------ ready-made variants


def _mc(labels: str, texts: list[str]) -> dict:
    return {"text": texts, "label": list(labels)}


# Two rows per dataset, shaped like the hub's (only the fields the configs read, plus ids).
FAKE_ROWS: dict[str, list[dict]] = {
    "allenai/ai2_arc": [
        {
            "id": "q1",
            "question": "Which gas do plants take in?",
            "choices": _mc("ABC", ["oxygen", "carbon dioxide", "helium"]),
            "answerKey": "B",
        },
        {
            "id": "q2",
            "question": "What melts ice?",
            "choices": _mc("1234", ["heat", "cold", "dark", "salt water"]),
            "answerKey": "1",
        },
    ],
    "Rowan/hellaswag": [
        {
            "ind": 4,
            "activity_label": "Roof shingle removal",
            "ctx_a": "A man is sitting on a roof.",
            "ctx_b": "he",
            "ctx": "A man is sitting on a roof. he",
            "endings": ["is using wrap to wrap a pair of skis.", "starts pulling up roofing."],
            "source_id": "activitynet~v_-JhWjGDPHMY",
            "split": "val",
            "split_type": "indomain",
            "label": "1",
        },
        {
            "ind": 5,
            "activity_label": "Baking cookies",
            "ctx_a": "A woman mixes flour and sugar.",
            "ctx_b": "then, she",
            "ctx": "A woman mixes flour and sugar. then, she",
            "endings": ["puts the tray in the oven.", "swims across the lake."],
            "source_id": "wikihow~1",
            "split": "val",
            "split_type": "indomain",
            "label": "0",
        },
    ],
    "baber/piqa": [
        {"goal": "How do you open a jar?", "sol1": "Twist the lid.", "sol2": "Eat it.", "label": 0},
        {"goal": "Dry wet shoes", "sol1": "Soak them.", "sol2": "Stuff newspaper.", "label": 1},
    ],
    "allenai/openbookqa": [
        {
            "id": "7-980",
            "question_stem": "The sun is responsible for",
            "choices": _mc("AB", ["puppies learning tricks", "plants sprouting"]),
            "answerKey": "B",
        },
        {
            "id": "7-981",
            "question_stem": "Which is a conductor?",
            "choices": _mc("AB", ["a copper wire", "a rubber band"]),
            "answerKey": "A",
        },
    ],
    "allenai/sciq": [
        {
            "question": "What do plants make in photosynthesis?",
            "distractor1": "salt",
            "distractor2": "iron",
            "distractor3": "sand",
            "correct_answer": "glucose",
            "support": "Plants make food from light.",
        },
        {
            "question": "What pulls objects to Earth?",
            "distractor1": "magnetism",
            "distractor2": "friction",
            "distractor3": "light",
            "correct_answer": "gravity",
            "support": "",
        },
    ],
    "tau/commonsense_qa": [
        {
            "id": "c1",
            "question": "Where do you keep milk? ",
            "question_concept": "milk",
            "choices": _mc("ABCDE", ["fridge", "oven", "garden", "roof", "shoe"]),
            "answerKey": "A",
        },
        {
            "id": "c2",
            "question": "What do you do at a library?",
            "question_concept": "library",
            "choices": _mc("ABCDE", ["swim", "read", "cook", "dance", "sleep"]),
            "answerKey": "B",
        },
    ],
    "aps/super_glue/boolq": [
        {"question": "is the sky blue", "passage": "The sky is blue.", "idx": 0, "label": 1},
        {"question": "is ice hot", "passage": "Ice is frozen water.", "idx": 1, "label": 0},
    ],
    "aps/super_glue/copa": [
        {
            "premise": "My body cast a shadow over the grass.",
            "choice1": "The sun was rising.",
            "choice2": "The grass was cut.",
            "question": "cause",
            "idx": 0,
            "label": 0,
        },
        {
            "premise": "The man broke his toe.",
            "choice1": "He dropped a hammer on his foot.",
            "choice2": "He got a hole in his sock.",
            "question": "effect",
            "idx": 1,
            "label": 0,
        },
    ],
    "cais/mmlu": [
        {
            "question": "What is 2 + 2?",
            "subject": "s",
            "choices": ["3", "4", "5", "6"],
            "answer": 1,
        },
        {
            "question": "Is 7 prime?",
            "subject": "s",
            "choices": ["yes", "no", "-", "?"],
            "answer": 0,
        },
    ],
}


def fake_load_dataset(path: str, name: str | None = None, split=None, **_kwargs):
    """As ``datasets.load_dataset``: every split, or a list of the splits named (lm-eval 0.5
    names them, ``split=["test[:]", ...]``)."""
    rows = FAKE_ROWS.get(f"{path}/{name}", FAKE_ROWS.get(path))
    if rows is None:
        raise AssertionError(f"no fake rows for dataset {path} {name}")
    data = datasets.Dataset.from_list(rows)
    if isinstance(split, list):
        return [data for _ in split]
    return datasets.DatasetDict({s: data for s in ("train", "validation", "test", "dev")})


@pytest.fixture(scope="module")
def ready_made():
    """Every ready-made variant and its base task, built on the fake rows."""
    from lm_eval.tasks import TaskManager

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(datasets, "load_dataset", fake_load_dataset)
        manager = TaskManager()
        loaded = manager.load(["dcpmi_lm_eval"])
        loaded["tasks"] = tasks_by_name(loaded)
        bases = {
            name: manager.load([task.config.metadata["base_task"]])["tasks"]
            for name, task in loaded["tasks"].items()
        }
        yield manager, loaded, {name: next(iter(b.values())) for name, b in bases.items()}


VARIANTS = sorted(p.stem for p in READY_MADE.glob("*_dcpmi.yaml"))
VARIANTS_IN_GROUP = [  # the order of task_configs/lm_eval/dcpmi_lm_eval.yaml
    "arc_easy_dcpmi",
    "arc_challenge_dcpmi",
    "hellaswag_dcpmi",
    "piqa_dcpmi",
    "openbookqa_dcpmi",
    "sciq_dcpmi",
    "commonsense_qa_dcpmi",
    "boolq_dcpmi",
    "copa_dcpmi",
]
MMLU_SUBJECTS = sorted(p.stem for p in (READY_MADE / "mmlu").glob("mmlu_*_dcpmi.yaml"))

# First document of each variant: (its prompt, the continuations, the rendered domain premise).
EXPECTED_FIRST_DOC = {
    "arc_easy_dcpmi": (
        "Question: Which gas do plants take in?\nAnswer:",
        [" oxygen", " carbon dioxide", " helium"],
        "Answer:",
    ),
    "arc_challenge_dcpmi": (
        "Question: Which gas do plants take in?\nAnswer:",
        [" oxygen", " carbon dioxide", " helium"],
        "Answer:",
    ),
    "hellaswag_dcpmi": (
        "Roof shingle removal: A man is sitting on a roof. He",
        [" is using wrap to wrap a pair of skis.", " starts pulling up roofing."],
        "He",
    ),
    "piqa_dcpmi": (
        "Question: How do you open a jar?\nAnswer:",
        [" Twist the lid.", " Eat it."],
        "Answer:",
    ),
    "openbookqa_dcpmi": (
        "The sun is responsible for",
        [" puppies learning tricks", " plants sprouting"],
        "for",
    ),
    "sciq_dcpmi": (
        "Plants make food from light.\nQuestion: What do plants make in photosynthesis?\nAnswer:",
        [" salt", " iron", " sand", " glucose"],
        "Answer:",
    ),
    "commonsense_qa_dcpmi": (
        "Question: Where do you keep milk?\nA. fridge\nB. oven\nC. garden\nD. roof\nE. shoe\n"
        "Answer:",
        [" A", " B", " C", " D", " E"],
        "Answer:",
    ),
    "boolq_dcpmi": (
        "The sky is blue.\nQuestion: is the sky blue?\nAnswer:",
        [" no", " yes"],
        "Answer:",
    ),
    # lm-eval's copa options carry a space and its default delimiter adds another
    "copa_dcpmi": (
        "My body cast a shadow over the grass because",
        ["  the sun was rising.", "  the grass was cut."],
        "because",
    ),
    "mmlu_abstract_algebra_dcpmi": (
        "The following are multiple choice questions (with answers) about abstract algebra.\n\n"
        "What is 2 + 2?\nA. 3\nB. 4\nC. 5\nD. 6\nAnswer:",
        [" A", " B", " C", " D"],
        "Answer:",
    ),
}
# Second documents where the domain premise changes with the document.
EXPECTED_SECOND_PREMISE = {
    "hellaswag_dcpmi": "she",
    "openbookqa_dcpmi": "conductor?",
    "copa_dcpmi": "therefore",
}


def test_ready_made_group_runs_every_variant(ready_made):
    _manager, loaded, _bases = ready_made
    assert set(loaded["tasks"]) == set(VARIANTS) | set(MMLU_SUBJECTS)
    assert len(MMLU_SUBJECTS) == 57
    group_map = {group: [bare(c) for c in names] for group, names in loaded["group_map"].items()}
    assert group_map["dcpmi_lm_eval"] == [*VARIANTS_IN_GROUP, "mmlu_dcpmi"]
    assert group_map["mmlu_dcpmi"] == [
        "mmlu_dcpmi_stem",
        "mmlu_dcpmi_other",
        "mmlu_dcpmi_social_sciences",
        "mmlu_dcpmi_humanities",
    ]


def test_mmlu_variant_mirrors_lm_evals_mmlu(ready_made):
    manager, loaded, _bases = ready_made
    categories = ("stem", "other", "social_sciences", "humanities")
    index = task_index(manager)
    for category in categories:
        theirs = sorted(index[f"mmlu_{category}_tasks"].tags)
        ours = sorted(
            t.task_name for t in loaded["groups"][f"mmlu_dcpmi_{category}"].get_all_tasks()
        )
        assert ours == [f"{name}_dcpmi" for name in theirs]
    # lm-eval's mmlu groups aggregate acc weighted by size; ours do so for every accuracy
    for group in ("mmlu_dcpmi", *(f"mmlu_dcpmi_{c}" for c in categories)):
        aggregated = {
            m.metric: m.weight_by_size for m in loaded["groups"][group].aggregate_metric_list
        }
        assert aggregated == dict.fromkeys(
            ("acc_unc", "acc", "acc_avg", "acc_norm", "acc_dcpmi"), True
        )


@pytest.mark.fast
def test_ready_made_files_name_their_base_and_copy_nothing():
    copied_keys = {"dataset_path", "doc_to_text", "doc_to_choice", "doc_to_target", "include"}
    for name in VARIANTS:
        config = yaml.safe_load((READY_MADE / f"{name}.yaml").read_text().replace("!function ", ""))
        assert config["task"] == config["base_task"] + "_dcpmi"
        assert config["class"] == "lm_eval_dcpmi.task.DCPMITask"
        assert not copied_keys & set(config), name


@pytest.mark.fast
def test_generated_mmlu_files_are_current():
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "generate_mmlu_dcpmi", ROOT / "scripts" / "generate_mmlu_dcpmi.py"
    )
    generator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generator)
    assert generator.main(["--check"]) == 0


@pytest.mark.parametrize("name", [*VARIANTS, "mmlu_abstract_algebra_dcpmi"])
def test_variant_renders_base_requests_and_the_prompts_ending(ready_made, name):
    _manager, loaded, bases = ready_made
    variant, base = loaded["tasks"][name], bases[name]
    variant_docs, base_docs = request_pairs(variant, 2), request_pairs(base, 2)
    prompt, continuations, premise = EXPECTED_FIRST_DOC[name]
    expected = [(prompt, c) for c in continuations]
    # lm-eval 0.5 puts the target delimiter before an option only where neither side has
    # whitespace at the join (MultipleChoiceTask._ll_pair): copa's " the sun" gets none
    single = [(p, c[1:] if c.startswith("  ") else c) for p, c in expected]
    assert base_docs[0] == (single if LM_EVAL_05 else expected)
    premises = [premise, EXPECTED_SECOND_PREMISE.get(name, premise)]
    for doc_pairs, base_pairs, doc_premise in zip(variant_docs, base_docs, premises, strict=True):
        conditional, domain = doc_pairs[: len(base_pairs)], doc_pairs[len(base_pairs) :]
        assert conditional == base_pairs  # the base task's own requests, unchanged
        assert base_pairs[0][0].endswith(doc_premise)  # the prompt ends with the premise
        # the domain request: the task's description (MMLU's subject line), then the
        # premise, no few-shot examples; the very same continuations
        description = base.config.description or ""
        assert domain == [(description + doc_premise, c) for _, c in base_pairs]


def test_variants_keep_the_base_tasks_metrics_and_settings(ready_made):
    _manager, loaded, bases = ready_made
    for name, variant in loaded["tasks"].items():
        base = bases[name]
        for key in ("dataset_path", "dataset_name", "test_split", "fewshot_split", "description"):
            assert getattr(variant.config, key) == getattr(base.config, key), (name, key)
        assert variant.config.metadata["base_task"] == base.config.task
