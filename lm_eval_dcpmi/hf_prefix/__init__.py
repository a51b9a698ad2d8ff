"""The optional ``hf-prefix`` model: PrefixHFLM, prefix tree, schedule, cache, self-check."""
