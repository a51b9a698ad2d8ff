"""COPA (Roemmele et al. 2011), the dev set: a premise, two alternatives, cause or effect.

The folder's README.md says where the data comes from and what the tasks score."""

from __future__ import annotations

from lm_eval_dcpmi.data import Row, Upstream, field, index_in, nonempty

# The files its tasks read (paths in the data folder), where each comes from upstream and
# its sha256 (checked after each download).
# COPA's files ship in the package (lm_eval_dcpmi/data/copa/, BSD-2-Clause): with no data
# folder set they are read from there, never downloaded (data/_loaders.PACKAGED).
FILES = {
    "copa/copa-dev.xml": Upstream(
        "https://people.ict.usc.edu/~gordon/downloads/COPA-resources.tgz",
        "COPA-resources/datasets/copa-dev.xml",
        sha256="6251d7d99de4cbc6a2c3323923213e5e73071d286039b97a0908736e2be093bc",
    ),
}


def copa(row: Row) -> Row:
    for name in ("p", "a1", "a2"):
        nonempty(row, name)
    index_in(field(row, "asks_for"), ["cause", "effect"], "asks-for")
    gold = index_in(
        field(row, "most_plausible_alternative"), ["1", "2"], "most-plausible-alternative"
    )
    return {**row, "gold": gold}


# The record readers its YAMLs name (dataset_kwargs.record).
RECORDS = {"copa": copa}
