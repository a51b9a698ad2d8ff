#!/usr/bin/env bash
# The README's first commands as a newcomer runs them, timed: HEAD cloned into an empty
# folder with nothing beside it (no ../shared, so no data folder), DCPMI_DATA_DIR unset, no
# environment to reuse (an empty DCPMI_ENV_CACHE) and pip's cache off, so every package
# comes from the index again. Times `scripts/setup.sh`, then `scripts/demo.sh` (its set-up
# is then a check of seconds; the rest loads the embedded model and scores COPA's 500
# documents from the copy the package ships), checks that the demo printed the COPA table,
# and appends a row to results/benchmarks/fresh_machine.json and .md. With --tests DATA, then
# times `scripts/test.sh` there too, every environment made anew, reading the data from DATA
# (the tests need it; SLURM's tier needs root and apt-get).
# Usage: benchmarks/fresh_machine.sh [--tests DATA_FOLDER] [WORK_FOLDER]
#        (WORK_FOLDER: an empty or new folder; default a new one under /tmp)
# Where pip is set up to find a local torch wheel (these machines: /opt/wheels), torch
# comes from there, not the index; the record says which.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tests_data=""
if [ "${1:-}" = --tests ]; then
  tests_data=$(realpath "${2:?--tests needs the data folder}")
  [ -d "$tests_data" ] || { echo "fresh_machine.sh: --tests $2: no such folder" >&2; exit 2; }
  shift 2
fi
work=${1:-$(mktemp -d /tmp/fresh-machine.XXXXXX)}
mkdir -p "$work"
if [ -n "$(ls -A "$work")" ]; then
  echo "fresh_machine.sh: $work is not empty; give an empty or new folder" >&2
  exit 2
fi
git clone --quiet --no-local "$root" "$work/lm-eval-dcpmi"
clone=$work/lm-eval-dcpmi
commit=$(git -C "$clone" rev-parse --short HEAD)
export DCPMI_ENV_CACHE=$work/envs PIP_NO_CACHE_DIR=1
unset DCPMI_DATA_DIR DCPMI_VENV VIRTUAL_ENV
cd "$clone"
start=$EPOCHREALTIME
scripts/setup.sh > "$work/setup.log" 2>&1
setup_s=$(python3 -c "print($EPOCHREALTIME - $start)")
start=$EPOCHREALTIME
scripts/demo.sh > "$work/demo.log" 2>&1
demo_s=$(python3 -c "print($EPOCHREALTIME - $start)")
grep -q "dcpmi_copa" "$work/demo.log" && grep -q "DC-PMI" "$work/demo.log" || {
  echo "fresh_machine.sh: the demo printed no COPA table; see $work/demo.log" >&2
  exit 1
}
tests_s=""
if [ -n "$tests_data" ]; then
  start=$EPOCHREALTIME
  DCPMI_DATA_DIR=$tests_data scripts/test.sh > "$work/test.log" 2>&1 || {
    echo "fresh_machine.sh: scripts/test.sh failed; see $work/test.log" >&2
    exit 1
  }
  tests_s=$(python3 -c "print($EPOCHREALTIME - $start)")
fi
torch_from=$(grep -l "find-links" /etc/pip.conf /etc/xdg/pip/pip.conf ~/.config/pip/pip.conf \
  2>/dev/null | head -1 || true)
"$root/.venv/bin/python" - "$root" "$commit" "$setup_s" "$demo_s" "$torch_from" "$work" \
  "$tests_s" <<'PY'
import datetime, json, os, sys
from pathlib import Path

root, commit, setup_s, demo_s, torch_from, work, tests_s = sys.argv[1:]
sys.path.insert(0, f"{root}/benchmarks")
from common import machine  # noqa: E402

here = machine()
venv = Path(work, "lm-eval-dcpmi", ".venv").resolve()
size = sum(f.stat().st_size for f in venv.rglob("*") if f.is_file() and not f.is_symlink())
row = {
    "date": datetime.date.today().isoformat(),
    "commit": commit,
    "cpu": here["cpu"],
    "cpus": here["cpus"],
    "setup_s": round(float(setup_s), 1),
    "demo_s": round(float(demo_s), 1),
    "tests_s": round(float(tests_s), 1) if tests_s else None,
    "environment_gb": round(size / 1e9, 2),
    "torch_from": f"a local wheel ({torch_from} find-links)" if torch_from else "the package index",
}
out = Path(root, "results", "benchmarks", "fresh_machine.json")
rows = json.loads(out.read_text()) if out.exists() else []
rows.append(row)
out.write_text(json.dumps(rows, indent=1) + "\n")
lines = [
    "# The README's first commands on a fresh machine",
    "",
    "`benchmarks/fresh_machine.sh`: a clone in an empty folder with nothing beside it "
    "(`DCPMI_DATA_DIR` unset, no `../shared`), no environment to reuse and pip's cache off. "
    "`scripts/setup.sh` makes `.venv`; `scripts/demo.sh` then checks it (seconds), loads the "
    "embedded model and scores COPA's 500 documents from the copy the package ships. "
    f"Data: [{out.name}]({out.name}).",
    "",
    "| Date | Machine | Commit | `scripts/setup.sh` | `scripts/demo.sh` after it "
    "| `scripts/test.sh` after them (its other environments made) | `.venv` | torch from |",
    "|---|---|---|---|---|---|---|---|",
]


def minutes(s):
    if s is None:
        return "not run"
    m, s = divmod(round(s), 60)
    return f"{m} min {s:02d} s"


for r in rows:
    lines.append(
        f"| {r['date']} | {r['cpus']} {r['cpu']} cores | {r['commit']} | "
        f"{minutes(r['setup_s'])} | {minutes(r['demo_s'])} | {minutes(r.get('tests_s'))} | "
        f"{r['environment_gb']} GB | {r['torch_from']} |"
    )
out.with_suffix(".md").write_text("\n".join(lines) + "\n")
print(json.dumps(row))
PY
