"""``dcpmi merge``: the shards of one run (``dcpmi run --shard K/N``) joined into that run.

Modules: ``_merge`` (the command's work), ``_mergeable`` (what the shards must hold to be
joined) and ``_shard_bounds`` (what it reads from a shard, bounded before it is trusted).
"""

from lm_eval_dcpmi._exports import lazy_exports

# public name -> the private module that defines it
_EXPORTS = {
    "merge": "_merge",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
