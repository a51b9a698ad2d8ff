#!/usr/bin/env bash
# The fuzz tier for longer: tests/test_fuzz.py under the hypothesis profile dcpmi-long, with
# fresh seeds, for N minutes (default 10) split between its two properties on files (a
# mutated run through verify, report and export; mutated shards through merge; the third,
# --shard's scheduler variables, takes seconds). Every finding is written
# down instead of stopping at the first; at the end it prints how many cases it tried and
# each distinct finding. Before the clock starts it needs the real shard runs of
# tests/conftest.py (the embedded model on CB, 3 shards: a few minutes) and the data.
#   scripts/fuzz.sh --minutes 30
#   scripts/fuzz.sh --minutes 5 -k merge      # extra arguments go to pytest
set -euo pipefail
cd "$(dirname "$0")/.."
minutes=10
while [ $# -gt 0 ]; do
    case "$1" in
        --minutes) minutes=$2; shift 2 ;;
        --minutes=*) minutes=${1#*=}; shift ;;
        *) break ;;
    esac
done
venv=${DCPMI_VENV:-.venv}
# the data folder: $DCPMI_DATA_DIR, else ../shared/data where it exists (the fuzzed runs
# are built again from it; without one the tests that need it stop pytest)
if [ -z "${DCPMI_DATA_DIR:-}" ] && [ -d ../shared/data ]; then
  export DCPMI_DATA_DIR=../shared/data
fi
found=$(mktemp -d "${TMPDIR:-/tmp}/dcpmi-fuzz.XXXXXX")
export DCPMI_FUZZ_PROFILE=dcpmi-long
export DCPMI_FUZZ_SECONDS=$((minutes * 60 / 2))  # each of the two properties on files
export DCPMI_FUZZ_FINDINGS=$found/findings.jsonl DCPMI_FUZZ_SUMMARY=$found/summary.jsonl
echo "fuzz: $minutes minute(s) of cases; findings in $found"
status=0
"$venv/bin/python" -m pytest -q -p no:cacheprovider -m fuzz tests/test_fuzz.py "$@" || status=$?
"$venv/bin/python" - "$found" <<'EOF'
import collections, json, pathlib, sys

found = pathlib.Path(sys.argv[1])
summary = [json.loads(line) for line in (found / "summary.jsonl").read_text().splitlines()] \
    if (found / "summary.jsonl").exists() else []
findings = [json.loads(line) for line in (found / "findings.jsonl").read_text().splitlines()] \
    if (found / "findings.jsonl").exists() else []
for part in summary:
    print(f"fuzz: {part['property']}: {part['cases']} cases, {part['commands']} commands in "
          f"{part['seconds']} s, {part['findings']} finding(s)")
print(f"fuzz: {sum(p['cases'] for p in summary)} cases tried, {len(findings)} finding(s)")
distinct = collections.Counter((f["command"].split()[0], f["problem"]) for f in findings)
for (command, problem), count in distinct.most_common():
    case = next(f["case"] for f in findings if (f["command"].split()[0], f["problem"]) == (command, problem))
    print(f"  {command}: {problem} ({count}x)\n    e.g. {case}")
EOF
exit $status
