#!/usr/bin/env bash
# Submits the run that settings.sh sets: the shard array (shard.sbatch, task K scores
# shard K of N) and the merge job (merge.sbatch), which SLURM starts only once every task
# of the array succeeded (afterok) and cancels if one failed.
#
#   scripts/slurm/submit.sh        shards 1-N, then the merge
#   scripts/slurm/submit.sh 3      shard 3 again (it failed), then the merge; the shards
#                                  already whole are kept
#   scripts/slurm/submit.sh 2,5    shards 2 and 5 again, then the merge
#
# A merge job also waits for this run's earlier shard arrays that are still queued or
# running (their job ids are kept in OUTPUT/logs/shard-jobs), so a failed shard can be
# submitted again at once. Prints the job ids. DCPMI_SLURM_SETTINGS names another settings
# file.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
settings=$(realpath "${DCPMI_SLURM_SETTINGS:-$here/settings.sh}")
# shellcheck source=settings.sh
source "$settings"
export DCPMI_SLURM_SETTINGS=$settings  # every job reads it again (sbatch passes the environment)
array=${1:-1-$SHARDS}
mkdir -p "$OUTPUT/shards" "$OUTPUT/logs"
shards=$(sbatch --parsable --array="$array" "${SHARD_SBATCH[@]}" \
    --output="$OUTPUT/logs/shard-%a.out" "$here/shard.sbatch")
shards=${shards%%;*}
after="" waiting=""
for earlier in $(cat "$OUTPUT/logs/shard-jobs" 2>/dev/null); do
    if [ -n "$(squeue -h -j "$earlier" -o %i 2>/dev/null)" ]; then
        after+=",afterany:$earlier" waiting+=" $earlier"
    fi
done
echo "$shards" >>"$OUTPUT/logs/shard-jobs"
merge=$(sbatch --parsable --dependency="afterok:$shards$after" --kill-on-invalid-dep=yes \
    "${MERGE_SBATCH[@]}" --output="$OUTPUT/logs/merge-%j.out" "$here/merge.sbatch")
merge=${merge%%;*}
echo "shards: job $shards, array $array of $SHARDS (logs: $OUTPUT/logs/shard-K.out)"
echo "merge: job $merge, once every shard task succeeded${waiting:+ and earlier shard job(s)$waiting ended}" \
    "(log: $OUTPUT/logs/merge-$merge.out)"
