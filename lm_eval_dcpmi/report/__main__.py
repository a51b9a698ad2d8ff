"""``python -m lm_eval_dcpmi.report`` (same as ``dcpmi report``)."""

from lm_eval_dcpmi.report.command import main

raise SystemExit(main())
