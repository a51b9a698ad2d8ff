"""Write a dataset folder's ``first_documents.json`` from the tasks as they are built now.

    DCPMI_DATA_DIR=../shared/data .venv/bin/python scripts/first_documents.py copa

For each task named in the folder's file (or given with ``--tasks``): its document count,
and for its first documents the gold index and every (context, continuation) request,
conditional then reference (a fixed label set's content-free requests left out).
tests/test_dataset_folders.py compares the built tasks with the file. A new dataset's
file is written by this script and then **checked by hand** against the spec and the raw
data file: the test only guards what was checked.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

from lm_eval_dcpmi.data import _folders as folders  # noqa: E402  (after the offline switches)


def first_documents(task: Any, n: int) -> dict[str, Any]:
    """A built DC-PMI task's count and first ``n`` documents (gold, requests)."""
    task.build_all_requests(limit=n, rank=0, world_size=1)
    by_doc: dict[int, list[Any]] = {}
    for instance in task.instances:
        by_doc.setdefault(instance.doc_id, []).append(instance)
    first = []
    for doc_id in sorted(by_doc):
        requests = sorted(by_doc[doc_id], key=lambda instance: instance.idx)
        n_options, _carrier = task.layout.n_options([r.arguments[1] for r in requests])
        kept = requests[: task.layout.n_requests(n_options, carrier=False)]
        first.append(
            {
                "gold": int(task.eval_docs[doc_id]["gold"]),
                "requests": [list(r.arguments[:2]) for r in kept],
            }
        )
    return {"documents": len(task.eval_docs), "first": first}


def dump(found: dict[str, Any]) -> str:
    """The file's text: JSON, one request per line, so that a reader can check each by eye."""
    line = lambda value: json.dumps(value, ensure_ascii=False)  # noqa: E731
    out = ["{"]
    for t, (name, entry) in enumerate(found.items()):
        out += [f" {line(name)}: {{", f'  "documents": {entry["documents"]},', '  "first": [']
        for d, doc in enumerate(entry["first"]):
            out.append(f'   {{"gold": {doc["gold"]}, "requests": [')
            out += [f"    {line(r)}," for r in doc["requests"][:-1]]
            out += [f"    {line(doc['requests'][-1])}"]
            out.append("   ]}" + ("," if d < len(entry["first"]) - 1 else ""))
        out += ["  ]", " }" + ("," if t < len(found) - 1 else "")]
    return "\n".join([*out, "}"]) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", help="a dataset folder's name (task_configs/<folder>)")
    parser.add_argument("--tasks", help="comma-separated tasks (default: those in the file)")
    parser.add_argument("--documents", type=int, default=2, help="first documents (default 2)")
    args = parser.parse_args()

    from lm_eval.tasks import TaskManager

    from lm_eval_dcpmi import embedded

    folder = folders.dataset_folders()[args.folder]
    path = Path(folder) / folders.FIRST_DOCUMENTS
    names = args.tasks.split(",") if args.tasks else list(json.loads(path.read_text()))
    manager = TaskManager(metadata=embedded.model_args())
    loaded = manager.load(names)["tasks"]
    tasks = {key.rsplit("::", 1)[-1]: task for key, task in loaded.items()}
    found = {name: first_documents(tasks[name], args.documents) for name in names}
    text = dump(found)
    assert json.loads(text) == found  # a safeguard for the hand-made layout
    path.write_text(text, encoding="utf-8")
    counts = ", ".join(f"{name} ({entry['documents']} documents)" for name, entry in found.items())
    print(f"{path}: {counts}")


if __name__ == "__main__":
    main()
