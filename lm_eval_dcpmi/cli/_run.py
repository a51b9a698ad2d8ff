"""``dcpmi run [lm_eval options]``: lm-eval's run with the plugin's tasks registered, the
defaults filled in and every check made before the model loads (``_run_steps``), then the
DC-PMI table."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from lm_eval_dcpmi.cli._subcommand import SubCommand, stopped, user_error
from lm_eval_dcpmi.errors import one_line

RUN_DESCRIPTION = """\
Runs `lm_eval run` with the plugin's tasks registered. Defaults: --model hf; for hf or
hf-prefix, --model_args of the embedded SmolLM2-135M; --tasks: those --samples names,
else dcpmi; --batch_size 8; --device cpu when no GPU is present. Every option is passed
to lm-eval (see `lm_eval run --help`), except:

  --dcpmi_task TASK=PREMISE   (repeatable) also run the DC-PMI variant of the registered
      multiple-choice TASK (lm-eval's own, or one from --include_path), named TASK_dcpmi,
      with the domain premise PREMISE (a string or a Jinja template over the document;
      end it the way TASK's prompt ends, e.g. arc_easy="Answer:"). The variant joins
      --tasks (alone, it replaces the default dcpmi group), so the base task can run
      beside it: dcpmi run --tasks arc_easy --dcpmi_task arc_easy="Answer:" --limit 20
      For a newline in PREMISE use the shell's quoting, e.g. $'\\nAnswer:'.
      --dcpmi_task TASK alone takes each document's last word of its premise as its
      domain premise (the paper's rule; results say "DC-PMI (last-word premise)").
  --model_id ORG/NAME   the model's hub id, written into the results files when the
      model is a local folder that names none (the embedded model and hub ids need none);
      see docs/leaderboards.md
  --quick N   score N documents of each task, evenly spread over its evaluation split:
      a fair quick look (--limit N takes the first N, and some files are ordered by
      label). Not with --limit or --samples.
  --shard K/N   score shard K of N: every Nth document of each task, starting with
      document K-1 (as lm-eval deals documents to its ranks), e.g. one SLURM array job
      each; `dcpmi merge SHARDS... --out DIR` joins the N runs into one. Not with --limit,
      --samples or --quick.
  --shard slurm   K and N from the SLURM array job (sbatch --array=1-N); slurm/N: N
      given, and the array any of the shards 1..N (e.g. --array=3 to run shard 3 again);
      kubernetes/N: K from an Indexed Job's JOB_COMPLETION_INDEX (0-based) of N
      completions. Refused in one line when the variables are missing or do not fit.
  --tasks list   list the plugin's groups, tags and tasks (as `dcpmi tasks`).

The tasks (configs, data, every document) are checked before the model loads; errors in
data, task configs or options are printed as one line, exit status 2."""


def run_lm_eval(forwarded: Sequence[str]) -> int:
    """Run lm-eval in this process with the plugin registered; print the DC-PMI table.

    A ``DCPMIError`` becomes one line on stderr and exit status 2. The temporary folder
    (``--dcpmi_task`` YAMLs, results for the table) is removed whatever ends the run,
    SIGTERM and Ctrl-C included (exit status 143 and 130).
    """
    from lm_eval_dcpmi.cli import _run_steps as run_steps

    try:
        with run_steps.sigterm_raises():
            return run_steps.run(forwarded)
    except run_steps.Terminated:
        stopped("dcpmi: stopped by SIGTERM; temporary files removed.")
        return 143
    except KeyboardInterrupt:
        stopped("dcpmi: interrupted; temporary files removed.")
        return 130
    except Exception as err:
        cause = user_error(err)
        if cause is None:
            raise
        print(f"dcpmi: {one_line(str(cause))}", file=sys.stderr)
        return 2


class Run(SubCommand):
    name = "run"
    help = "run lm-eval with the dcpmi tasks (other options go to lm-eval unchanged)"
    description = RUN_DESCRIPTION
    raw = True

    def run_raw(self, argv: list[str]) -> int:
        if argv in (["-h"], ["--help"]):
            print(RUN_DESCRIPTION)
            return 0
        return run_lm_eval(argv)
