#!/usr/bin/env bash
# The project's test command: sets everything up on a fresh machine, then lints and tests,
# with the newest lm-eval that pyproject.toml allows and then with the oldest (in a second
# environment, .venv-lm-eval-$OLDEST_LM_EVAL). Extra arguments go to both pytest runs
# (e.g. `scripts/test.sh -k copa`). The tests read the real data files from
# $DCPMI_DATA_DIR (default ../shared/data): without them pytest stops with one message
# (DCPMI_REQUIRE_DATA=1; a plain `pytest` skips the tests that need the data instead).
set -euo pipefail
cd "$(dirname "$0")/.."
# The lower bound of `lm-eval>=...` in pyproject.toml (tests/test_install.py checks it).
OLDEST_LM_EVAL=0.4.12
export DCPMI_DATA_DIR=${DCPMI_DATA_DIR:-../shared/data}
export DCPMI_REQUIRE_DATA=1
venv=${DCPMI_VENV:-.venv}
oldest_venv=${DCPMI_OLDEST_VENV:-.venv-lm-eval-$OLDEST_LM_EVAL}

scripts/setup.sh
"$venv/bin/ruff" check .
"$venv/bin/ruff" format --check .
"$venv/bin/python" -m pytest -q "$@"

# The oldest lm-eval: the tests that drive lm-eval through its Python API (where versions
# differ), not the slow ones that start the CLI or install wheels (tests/test_install.py
# checks the packaging, the same whichever lm-eval the venv holds): CI stays well under
# 30 minutes.
DCPMI_VENV=$oldest_venv LM_EVAL_VERSION=$OLDEST_LM_EVAL scripts/setup.sh
"$oldest_venv/bin/python" -c "import importlib.metadata as m; v = m.version('lm-eval')
assert v == '$OLDEST_LM_EVAL', f'lm-eval {v} in $oldest_venv, not $OLDEST_LM_EVAL'"
"$oldest_venv/bin/python" -m pytest -q --ignore tests/test_install.py -m "not slow" "$@"
