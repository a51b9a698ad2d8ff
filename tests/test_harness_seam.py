"""Only ``lm_eval_dcpmi/_harness/`` uses lm-eval beyond its public names (no model, no data).

Every module of ``lm_eval_dcpmi`` outside ``_harness/`` (and ``lm_eval_dcpmi_autoload.py``)
is parsed with ``ast``; every import of lm-eval, at module level or inside a function, must
name one of ``PUBLIC``, and no attribute may name one of the lm-eval internals the seam
wraps (``INTERNALS``).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.fast

ROOT = Path(__file__).resolve().parents[1]
SEAM = ROOT / "lm_eval_dcpmi" / "_harness"

# lm-eval's public names the rest of the plugin may import: module -> names.
PUBLIC = {
    "lm_eval": {"simple_evaluate"},
    "lm_eval.api.instance": {"Instance"},
    "lm_eval.api.task": {"ConfigurableTask", "TaskConfig"},
    "lm_eval.tasks": {"TaskManager"},
}
# Attributes of lm-eval's objects that only the seam reads or sets.
INTERNALS = {
    "multiple_input",  # _harness._configurable_task.multiple_inputs / single_input
    "doc_to_prefix",  # _harness._configurable_task.gen_prefix
    "rnd",  # _harness._configurable_task.fewshot_random
    "resps",  # _harness._configurable_task.loglikelihood_answer
    "task_index",  # _harness._index
    "_loglikelihood_tokens",  # _harness._hflm.HookedHFLM
    "_detect_batch_size",
}


def outside_the_seam() -> list[Path]:
    files = [p for p in sorted((ROOT / "lm_eval_dcpmi").rglob("*.py")) if SEAM not in p.parents]
    return [*files, ROOT / "lm_eval_dcpmi_autoload.py"]


def violations(path: Path, root: Path = ROOT) -> list[str]:
    """``file:line: what`` for each import of lm-eval beyond ``PUBLIC`` and each use of an
    attribute in ``INTERNALS``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    where = path.relative_to(root)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "lm_eval" or alias.name.startswith("lm_eval."):
                    found.append(f"{where}:{node.lineno}: import {alias.name}")
        elif isinstance(node, ast.ImportFrom) and not node.level:
            module = node.module or ""
            if module != "lm_eval" and not module.startswith("lm_eval."):
                continue
            for alias in node.names:
                if alias.name not in PUBLIC.get(module, set()):
                    found.append(f"{where}:{node.lineno}: from {module} import {alias.name}")
        elif isinstance(node, ast.Attribute) and node.attr in INTERNALS:
            found.append(f"{where}:{node.lineno}: .{node.attr}")
    return found


def test_the_plugin_uses_lm_evals_internals_only_through_the_seam() -> None:
    found = [line for path in outside_the_seam() for line in violations(path)]
    assert found == [], "lm-eval internals outside lm_eval_dcpmi/_harness/:\n" + "\n".join(found)


def test_the_scan_finds_private_imports_and_internal_attributes(tmp_path: Path) -> None:
    source = (
        "import lm_eval.api.metrics\n"
        "from lm_eval import utils\n"
        "from lm_eval.api.instance import Instance\n"
        "def f(task):\n"
        "    from lm_eval._cli import HarnessCLI\n"
        "    return task.multiple_input, task.sampler.rnd\n"
    )
    copy = tmp_path / "lm_eval_dcpmi" / "_scan_sample.py"
    copy.parent.mkdir()
    copy.write_text(source, encoding="utf-8")
    found = violations(copy, tmp_path)
    where = "lm_eval_dcpmi/_scan_sample.py"
    assert found == [
        f"{where}:1: import lm_eval.api.metrics",
        f"{where}:2: from lm_eval import utils",
        f"{where}:5: from lm_eval._cli import HarnessCLI",
        f"{where}:6: .multiple_input",
        f"{where}:6: .rnd",
    ]


def test_lm_eval_compat_is_folded_into_the_seam() -> None:
    assert not (ROOT / "lm_eval_dcpmi" / "_lm_eval_compat.py").exists()
    # every module of the seam is named, with what it wraps, in the package's docstring
    described = (SEAM / "__init__.py").read_text(encoding="utf-8")
    for path in sorted(SEAM.glob("*.py")):
        if path.name != "__init__.py":
            assert f"``{path.stem}``" in described, f"_harness/__init__.py names no {path.stem}"


def test_lm_evals_custom_dataset_advice_is_quiet_for_the_plugins_tasks_only(caplog) -> None:
    import logging

    import lm_eval_dcpmi.task._dcpmi_task  # noqa: F401  (it sets the filter up)
    from lm_eval_dcpmi._harness._configurable_task import TASK_LOGGERS

    advice = (  # lm-eval 0.4.13, ConfigurableTask.download
        ": Custom kwargs can be passed to `--metadata` in console (as json string) or to the "
        "TaskManager."
    )
    with caplog.at_level(logging.INFO):
        for name in TASK_LOGGERS:
            logging.getLogger(name).info("dcpmi_copa" + advice)
            logging.getLogger(name).info("my_task" + advice)
            logging.getLogger(name).info("dcpmi_copa: another message")
    assert [record.getMessage() for record in caplog.records] == [
        "my_task" + advice,
        "dcpmi_copa: another message",
    ] * len(TASK_LOGGERS)


def test_a_logged_loglikelihood_as_each_lm_eval_release_writes_it() -> None:
    from lm_eval_dcpmi._harness._logged import logged_loglikelihood

    assert logged_loglikelihood(["-10.19205093383789", "False"]) == "-10.19205093383789"  # 0.4
    assert logged_loglikelihood([["-10.19205093383789", "False"]]) == "-10.19205093383789"
    assert logged_loglikelihood((-1.5, True)) == -1.5  # simple_evaluate keeps tuples


def test_a_template_error_as_the_template_raised_it() -> None:
    import jinja2

    from lm_eval_dcpmi._harness._templates import template_error

    undefined = jinja2.UndefinedError("'premise' is undefined")
    try:  # lm-eval 0.5.0.dev1's apply_template wraps what the template raised
        raise ValueError("Error rendering template: {{premise}} with doc: {}") from undefined
    except ValueError as wrapped:
        assert template_error(wrapped) is undefined
    other = ValueError("bad value")
    other.__cause__ = KeyError("x")
    assert template_error(other) is other  # a user's function's own error stays itself
    assert template_error(undefined) is undefined  # 0.4 passes Jinja's error through


def _lm_evals_apply_template():
    """The function lm-eval renders a task's template strings with: 0.4's in
    ``lm_eval.utils``, 0.5.0.dev1's in ``lm_eval/config/templates.py``."""
    from lm_eval import utils

    if hasattr(utils, "apply_template"):
        return lambda template, doc: utils.apply_template(template, doc)
    from lm_eval.config import templates

    return templates.apply_template


def test_each_template_is_compiled_once_and_renders_the_text_lm_eval_would(monkeypatch) -> None:
    import uuid

    import jinja2

    import lm_eval_dcpmi.task._rendering  # noqa: F401  (the DC-PMI task's import turns it on)
    from lm_eval_dcpmi._harness._templates import jinja_env, template_error

    env = jinja_env()
    compiled: list[str] = []
    compile_ = env.from_string
    monkeypatch.setattr(
        env, "from_string", lambda source: compiled.append(source) or compile_(source)
    )
    apply = _lm_evals_apply_template()
    # a template no other test has rendered (else its compiled form may be kept already)
    marker = uuid.uuid4().hex
    template = f"{{{{ premise }}}} {marker}: {{{{ options | map('affix', '[', ']') | join }}}}"
    docs = [{"premise": f"doc {i}", "options": ["a", str(i)]} for i in range(40)]
    texts = [apply(template, doc) for doc in docs]
    assert compiled.count(template) == 1  # 0.4 compiled it 40 times
    assert texts == [compile_(template).render(**doc) for doc in docs]
    assert texts[7] == f"doc 7 {marker}: [a][7]"
    with pytest.raises(Exception) as raised:  # a field the document lacks: Jinja's error
        apply(template, {"premise": "no options"})
    assert isinstance(template_error(raised.value), jinja2.UndefinedError)
