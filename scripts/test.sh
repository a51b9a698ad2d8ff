#!/usr/bin/env bash
# The project's test command: sets everything up on a fresh machine, then lints and tests,
# with the newest lm-eval that pyproject.toml allows, then with vLLM (.venv-vllm), then on
# a one-node SLURM cluster (as root), then with the pre-release lm-eval it allows
# (.venv-lm-eval-<version>), then with the lowest versions of everything pyproject.toml
# bounds, the oldest lm-eval among them, on Python 3.10 (.venv-lowest). Extra
# arguments go to every pytest run (e.g. `scripts/test.sh -k copa`). The tests read the
# real data files from $DCPMI_DATA_DIR (default ../shared/data, where it exists): without
# them pytest stops with one message (DCPMI_REQUIRE_DATA=1; a plain `pytest` skips the
# tests that need the data instead).
set -euo pipefail
cd "$(dirname "$0")/.."
# The pre-release within pyproject's range (pip installs it only when asked for it).
NEXT_LM_EVAL=0.5.0.dev1
# What the other releases' tiers run (OTHER_RELEASES in tests/helpers.py; a test checks both).
OTHER_RELEASES="fast or api"
# The data folder: $DCPMI_DATA_DIR if set, else ../shared/data where it exists, else none.
if [ -z "${DCPMI_DATA_DIR:-}" ] && [ -d ../shared/data ]; then
  export DCPMI_DATA_DIR=../shared/data
fi
if [ -n "${DCPMI_DATA_DIR:-}" ]; then
  export DCPMI_DATA_DIR
  echo "test: the evaluation data comes from $DCPMI_DATA_DIR (DCPMI_DATA_DIR)"
else
  unset DCPMI_DATA_DIR
  echo "test: no data folder (DCPMI_DATA_DIR unset, no ../shared/data): dcpmi fetch" \
    "downloads the upstream files after the set-up"
fi
export DCPMI_REQUIRE_DATA=1
venv=${DCPMI_VENV:-.venv}

scripts/setup.sh
# No data folder: the upstream files fetched once (each checked against its recorded sha256)
# into the user's cache, and the tests run on them (DCPMI_DATA_MIRROR, if set, names the
# server: docs/tasks.md, "Data").
if [ -z "${DCPMI_DATA_DIR:-}" ]; then
  export DCPMI_DATA_DIR=${XDG_CACHE_HOME:-$HOME/.cache}/lm-eval-dcpmi/data
  "$venv/bin/dcpmi" fetch --data_dir "$DCPMI_DATA_DIR"
  echo "test: the evaluation data comes from $DCPMI_DATA_DIR (dcpmi fetch)"
fi
# Every Eval Ever's own validator checks the exports (tests/test_leaderboard.py). Its package,
# every-eval-ever 0.3.0, needs Python 3.12 or newer, so it gets an environment of its own,
# made once and reused (~25 s, 460 MB), kept outside the checkout like the others.
eee_venv=.venv-every-eval-ever
. scripts/kept_environment.sh
keep_environment "$eee_venv" "every-eval-ever==0.3.0"
if [ ! -x "$eee_venv/bin/python" ]; then
  eee_base=""
  for candidate in python3.13 python3.12 "$(pyenv root 2>/dev/null)"/versions/3.1[2-9]*/bin/python3; do
    if "$candidate" -c 'import sys; assert sys.version_info >= (3, 12)' 2>/dev/null; then
      eee_base=$candidate; break
    fi
  done
  if [ -n "$eee_base" ]; then
    echo "setup: Every Eval Ever's validator in $eee_venv ($eee_base)"
    "$eee_base" -m venv "$(realpath -m "$eee_venv")"
    "$eee_venv/bin/python" -m pip install --quiet every-eval-ever==0.3.0
  else
    echo "setup: no Python 3.12+ here, so Every Eval Ever's validator is not installed and its test is skipped"
  fi
fi
if [ -x "$eee_venv/bin/python" ]; then export DCPMI_EEE_PYTHON=$PWD/$eee_venv/bin/python; fi
"$venv/bin/ruff" check .
"$venv/bin/ruff" format --check .
# Two workers (pytest-xdist), tests handed out one by one (the workers share the lm_eval
# CLI runs of the end-to-end and study tests, helpers.lm_eval_once): most of a test's
# time is one core's (lm_eval's start-up, loading the model and the data).
parallel=(-n "${DCPMI_TEST_WORKERS:-2}" --dist load)
"$venv/bin/python" -m pytest -q "${parallel[@]}" "$@"

# The GPU machine's check as that machine runs it, in a CPU twin of its image
# (tests/test_device_twin.py, marked `device_twin`): the environment scripts/setup-device-twin.sh
# makes once (torch 2.11.0's CUDA build, 4.9 GB, 2.5-5 min the first time, 15 s after), the
# wheels benchmarks/device_prepare.sh fetches, the docs' command line with --tiny (~3.5 min).
twin_status=0
scripts/setup-device-twin.sh || twin_status=$?
if [ "$twin_status" = 3 ]; then
    echo "test.sh: the GPU check's twin test (tests/test_device_twin.py) is skipped: no Python 3.12"
elif [ "$twin_status" != 0 ]; then
    exit "$twin_status"
else
    # exit status 5: the extra arguments selected none of them (e.g. -k copa)
    DCPMI_DEVICE_TWIN=.venv-device-twin "$venv/bin/python" -m pytest -q -m device_twin \
        tests/test_device_twin.py "$@" || [ $? = 5 ]
fi

# vLLM: lm-eval's vllm backend and local-completions against `vllm serve`, scoring as hf
# (tests/test_vllm.py, marked `vllm`), in the environment scripts/setup-vllm.sh makes once
# (vLLM's CPU build, ~3 GB; ~30 s when it is there). One worker: vLLM binds every core.
scripts/setup-vllm.sh
.venv-vllm/bin/python -m pytest -q -m vllm tests/test_vllm.py "$@"

# SLURM: the job files of scripts/slurm/ submitted to a real one-node cluster, with its
# faults (tests/test_slurm.py, marked `slurm`; 3 min 23 s to 4 min 27 s on 2 Xeon cores,
# results/benchmarks/test_command_2026-12-06.md). The cluster comes
# from the OS packages (slurm-wlm, munge), so only as root where apt-get works; it has the
# machine to itself (one job per core, after the other tests) and is stopped afterwards,
# however the tests end.
trap 'scripts/slurm/local_cluster.sh stop >/dev/null' EXIT
if ! slurm_reason=$(scripts/slurm/local_cluster.sh check); then
    echo "test.sh: the SLURM tests (tests/test_slurm.py) are skipped: $slurm_reason"
else
    # Where a cluster can run, one that does not start fails the command (not a skip).
    scripts/slurm/local_cluster.sh start
    # exit status 5: the extra arguments selected none of them (e.g. -k copa)
    "$venv/bin/python" -m pytest -q -m slurm tests/test_slurm.py "$@" || [ $? = 5 ]
    scripts/slurm/local_cluster.sh stop
fi
trap - EXIT

# The other releases: every test that needs no model, and the few marked `api` that run it
# through lm-eval's Python API (where releases differ; OTHER_RELEASES in tests/helpers.py);
# not the slow ones that start the CLI or install wheels, nor tests/test_install.py (it
# checks the packaging, the same whichever lm-eval the environment holds): CI stays within
# its time. The pre-release here; the oldest lm-eval (pyproject's lower bound) in the
# lowest-versions tier below, with the lowest versions of everything else.
for release in "$NEXT_LM_EVAL"; do
    release_venv=.venv-lm-eval-$release
    DCPMI_VENV=$release_venv LM_EVAL_VERSION=$release scripts/setup.sh
    "$release_venv/bin/python" -c "import importlib.metadata as m; v = m.version('lm-eval')
assert v == '$release', f'lm-eval {v} in $release_venv, not $release'"
    "$release_venv/bin/python" -m pytest -q "${parallel[@]}" --ignore tests/test_install.py \
        -m "$OTHER_RELEASES" "$@"
done

# The lowest versions pyproject.toml allows of lm-eval, torch, transformers, datasets, jinja2
# and PyYAML, on the lowest Python it allows (3.10; scripts/setup-requirements-lowest.txt):
# the same tests, hf-prefix's exactness against hf among them (tests/test_prefix_lm.py, `api`).
lowest_status=0
DCPMI_VENV=.venv-lowest DCPMI_LOWEST=1 scripts/setup.sh || lowest_status=$?
if [ "$lowest_status" = 3 ]; then
    echo "test.sh: the lowest-versions tier is skipped: no Python 3.10 on this machine"
elif [ "$lowest_status" != 0 ]; then
    exit "$lowest_status"
else
    .venv-lowest/bin/python -m pytest -q "${parallel[@]}" --ignore tests/test_install.py \
        -m "$OTHER_RELEASES" "$@"
fi
