"""The DC-PMI task: task class, decision rules, metrics, layout, checks, token counts."""
