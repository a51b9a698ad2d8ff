"""The optional ``hf-prefix`` model (``PrefixHFLM``): lm-eval's ``hf``, forwarding each shared
token prefix once.

Modules: ``_lm`` (the model), ``_tree`` (the prefix tree), ``_schedule`` (which tokens go
into which forward call), ``_masks`` (attention masks), ``_cache`` (the key/value caches
kept), ``_check`` (the self-check that decides how a model is driven), ``_reduced`` (what it
reads of a model's config) and ``_kernels`` (``prefix_kernels=onednn``).
"""

from lm_eval_dcpmi._exports import lazy_exports

# public name -> the private module that defines it
_EXPORTS = {
    "PrefixHFLM": "_lm",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
