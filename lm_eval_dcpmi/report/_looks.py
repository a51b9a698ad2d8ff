"""How reports and exports show a metric: its column label, its colour in figures, and the
source that a leaderboard's reader sees beside its rule.

The scoring table (``rules/scoring.METRICS``) says how a metric is computed; this one, how it
is shown. A metric without a look here is shown by its name, in grey: a new rule needs
no row here to appear everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass

from lm_eval_dcpmi.rules import ACCURACIES, metric_named

PAPER = "Holtzman et al. 2021, Surface Form Competition"
GREY = "#7f7f7f"


@dataclass(frozen=True)
class Look:
    label: str  # the column heading in reports (one word where it can be)
    colour: str  # in the report's figures
    description: str  # what the method is and where it comes from, for a leaderboard


LOOKS: dict[str, Look] = {
    "acc_unc": Look("Unc", "#8c8c8c", f"the paper's Unc baseline, {PAPER}"),
    "acc": Look("LM", "#1f77b4", "the plain language-model score (lm-eval's acc)"),
    "acc_avg": Look("Avg", "#ff7f0e", f"the paper's Avg baseline, {PAPER}"),
    "acc_norm": Look(
        "Char", "#9467bd", "length-normalised by characters (lm-eval's acc_norm; the paper's Char)"
    ),
    "acc_dcpmi": Look("DC-PMI", "#2ca02c", f"DC-PMI, {PAPER}"),
    "acc_cc": Look("CC", "#e377c2", "contextual calibration, Zhao et al. 2021"),
    "acc_bc": Look("BC", "#17becf", "batch calibration, Zhou et al. 2024"),
}


def metric_look(name: str) -> Look:
    """The look of metric ``name``: its row here; PMI under an extra reference context is
    "PMI <reference>"; any other metric shows its name."""
    if name in LOOKS:
        return LOOKS[name]
    row = metric_named(name)
    if row is not None and row.reference is not None:
        return Look(f"PMI {row.reference}", GREY, "PMI under an extra reference context")
    return Look(name, GREY, name)


def metric_label(name: str) -> str:
    """The column heading of metric ``name`` (``metric_look(name).label``)."""
    return metric_look(name).label


# The report's columns: the paper's five methods, in the table's order, and their labels.
METHODS: tuple[str, ...] = ACCURACIES
LABELS: dict[str, str] = {name: metric_label(name) for name in METHODS}
