"""``python -m lm_eval_dcpmi SUBCOMMAND ...``: the ``dcpmi`` command."""

from lm_eval_dcpmi.cli import main

raise SystemExit(main())
