"""Regenerate docs/results and the results tables of README.md and docs/*.md.

    .venv/bin/python scripts/make_results.py           # rewrite them
    .venv/bin/python scripts/make_results.py --check   # exit 1, naming what is stale
    .venv/bin/python scripts/make_results.py --add RESULTS_FILE --set NAME   # add a run first

What each option does, and where the inputs and outputs are: lm_eval_dcpmi/report/pages.py.
"""

import sys

from lm_eval_dcpmi.report.pages import main

if __name__ == "__main__":
    sys.exit(main())
