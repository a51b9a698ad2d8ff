# The run that scripts/slurm/ submits, set in this one place: submit.sh reads it, and so
# does every job it submits (keep it where every node sees it).
#
# What the nodes must share, at the same paths (NFS, Lustre, ...):
#   OUTPUT          every shard writes OUTPUT/shards/K there, the merge job reads them all
#                   and writes OUTPUT/merged and OUTPUT/report; the jobs' logs: OUTPUT/logs
#   scripts/slurm/  these job files and this file, which every job reads
#   DCPMI           the Python environment with the plugin, the same on every node
#   DCPMI_DATA_DIR  the evaluation data: every shard checks its documents against it, and
#                   the merge job verifies the merged run against it
#   HF_HOME         the Hugging Face cache with the model and its tokenizer (the model
#                   cache): download the model once before submitting, on a node with a
#                   network; the jobs run offline and never download it again
# A node's own disk is not enough for any of these: a shard written there is lost to merge.

SHARDS=8                                    # N: one array task, one node, per shard
OUTPUT=/shared/dcpmi/runs/qwen2.5-7b        # a new folder for each run
TASKS=dcpmi                                 # --tasks of dcpmi run
MODEL=(--model hf-prefix --model_args pretrained=Qwen/Qwen2.5-7B,dtype=bfloat16)
RUN_OPTIONS=()                              # more dcpmi run options, e.g. (--batch_size 16)
CHECK_OPTIONS=()                            # merge's and verify's, e.g. (--tokenizer /shared/models/x)
#                                             when the model is a local folder (recorded as <local>/x)
DCPMI=/shared/envs/dcpmi/bin/dcpmi
export DCPMI_DATA_DIR=/shared/dcpmi/data
export HF_HOME=/shared/huggingface
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1
SHARD_SBATCH=(--gpus=1 --cpus-per-task=8 --mem=64G --time=24:00:00)   # each shard's job
MERGE_SBATCH=(--cpus-per-task=2 --mem=16G --time=2:00:00)             # the merge job
