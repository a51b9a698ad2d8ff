"""The scoring rules: the one table of metrics (``scoring``) and their registration with
lm-eval (``metrics``)."""
