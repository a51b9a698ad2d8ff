"""Leaderboard submissions: a portable model identity in results files (``identity``),
what data and premise each task scored (``provenance``), ``dcpmi export`` to the
leaderboards' formats (``export``) and ``dcpmi verify`` (``verify``)."""
