"""What a DC-PMI task says once per process about how lm-eval splits a run's documents
across processes."""

from __future__ import annotations

import logging
import os

log = logging.getLogger(__name__)

_WARNED_WORLD: list[bool] = []


def warn_if_every_process_scores_everything(world_size: int) -> None:
    """lm-eval's `hf` shards documents only across several GPUs: under `torchrun` or
    `accelerate launch` on the CPU (or one GPU) every process is rank 0 of 1 and scores the
    whole run. Said once per process."""
    launched = os.environ.get("WORLD_SIZE", "1")
    if launched.isdigit() and int(launched) > 1 and world_size == 1 and not _WARNED_WORLD:
        _WARNED_WORLD.append(True)
        log.warning(
            "%s processes were started (WORLD_SIZE=%s) but the model reports a world size "
            "of 1: lm-eval's hf splits documents only across several GPUs, so every process "
            "will score the whole run. Start one process (see docs/harness.md, several GPUs).",
            launched,
            launched,
        )
