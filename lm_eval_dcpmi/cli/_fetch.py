"""``dcpmi fetch [--data_dir DIR]``: every data file the tasks read, downloaded once and
checked against its recorded sha256, into a data folder for ``DCPMI_DATA_DIR``
(``lm_eval_dcpmi.data._fetch``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from lm_eval_dcpmi.cli._subcommand import SubCommand, stopped
from lm_eval_dcpmi.errors import DCPMIError, printable

FETCH_DESCRIPTION = """\
Downloads every file the tasks read (the upstream files and archives that the dataset
folders name, task_configs/*/dataset.py), once, through the tasks' own download (the
datasets library's download manager and its cache), checks each file, or RACE's folders,
against the sha256 recorded there, and copies it into a data folder laid out as
<dataset>/<file>: point DCPMI_DATA_DIR at it. A file the folder already holds with the
recorded sha256 is not downloaded again. DCPMI_DATA_MIRROR=http[s]://host[:port][/prefix]
sends every download to that server instead, at the upstream path. Exit status 0: every
file is there and checked; 2: a download failed or a sha256 differs (named, with both
digests), or DCPMI_DATA_MIRROR is not an http or https address."""


def run_fetch(args: argparse.Namespace) -> int:
    from lm_eval_dcpmi.data import default_data_dir, fetch, mirror_from_env

    data_dir: Path = (args.data_dir or default_data_dir()).expanduser().absolute()
    fetched = cached = 0
    try:
        mirror = mirror_from_env()  # parsed here, once, before any download
        for done in fetch(data_dir, mirror):
            said = f"{done.file}  sha256 {done.sha256[:16]}..., {done.what}"
            if done.address is None:
                cached += 1
                print(printable(f"cached   {said}"))
            else:
                fetched += 1
                print(printable(f"fetched  {said}; from {done.address}"))
            sys.stdout.flush()  # a download can take minutes: each line as it is done
    except DCPMIError as error:
        print(f"dcpmi fetch: {printable(str(error))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        # each file is copied in whole or not at all (data._fetch): the ones done stay
        stopped(
            printable(
                f"dcpmi fetch: interrupted; the {fetched + cached} files done so far are in "
                f"{data_dir}, whole; run it again for the rest."
            )
        )
        return 130
    print(
        printable(
            f"dcpmi fetch: {fetched + cached} files in {data_dir}: {fetched} fetched, {cached} "
            f"already there (cached); every sha256 checked. Use them: export "
            f"DCPMI_DATA_DIR={data_dir}"
        )
    )
    return 0


class Fetch(SubCommand):
    name = "fetch"
    help = "download every task's data files once, checked, into a data folder"
    description = FETCH_DESCRIPTION

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--data_dir",
            type=Path,
            help="the folder to fill (default: ~/.cache/lm-eval-dcpmi/data, under "
            "$XDG_CACHE_HOME when that is set)",
        )

    def run(self, args: argparse.Namespace) -> int:
        return run_fetch(args)
