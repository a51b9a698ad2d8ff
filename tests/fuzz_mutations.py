"""The fuzz tier's mutations (tests/test_fuzz.py): hypothesis strategies that change one
file of a genuine run's folder, or the folder around it, in one way.

* **JSON** (a results file, or one line of a samples file): a value replaced by a number at
  the limits (NaN, +-inf, 0, -1, 10^12, 10^400, a 5,000-digit integer), a name with a path
  separator, ``..``, a NUL, a line break or a lone surrogate, or another type; a number or
  a name changed a little; a key dropped, or added (a sibling's value copied under a new
  name: a made-up task, a metric of another filter); a value wrapped in a list or an
  object, or nested a few thousand levels deep.
* **Lines** of a samples file: one dropped, repeated, swapped, or not a JSON object.
* **Bytes**: the file cut short, bytes that are not UTF-8 put in, a byte-order mark, NULs,
  a gzip file's compressed bytes broken.
* **Special files**: the file replaced by a FIFO, a folder, or a link (dangling, to
  itself, to ``/dev/null`` or ``/dev/zero``, to another file of the run); or such an entry
  added beside the run's files under a results or samples file's name.
* **Names**: a task renamed everywhere in its results file (and its samples file, where the
  name can be a file's), to a name with separators, ``..``, a NUL, or another task's.

Each ``Mutation`` says in words what it did (enough to write it again as a regression
test); ``{sandbox}`` in a value is the case's folder, to aim an absolute path inside it.
"""

from __future__ import annotations

import copy
import gzip
import json
import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

BIG_INTEGER = "{bigint}"  # written as a 5,000-digit integer (more than Python reads)
SANDBOX = "{sandbox}"

LIMITS = [0, -0.0, 1, -1, 0.5, 2, 3, 10**12, -(10**12), 2**63, 10**400, 1e308, 5e-324,
          math.nan, math.inf, -math.inf, BIG_INTEGER]  # fmt: skip
NAMES = ["", ".", "..", "../..", "../../../escaped", f"{SANDBOX}/escaped", "a/b", "a\\b",
         "nul\x00byte", "line\nbreak", "\ud800", "é", "dcpmi_imaginary", "dcpmi_copa",
         "my/quiz_dcpmi", "dcpmi_cb/../../../evil", "../../../../etc/passwd", " ", "N/A",
         "nan", "1e309", "-1", "0", "x" * 5000]  # fmt: skip
SHAPES = [None, True, False, [], {}, [[]], {"": None}, [1, 2], {"a": {"b": {}}}]
KEYS = ["", "..", "a/b", "nul\x00key", "dcpmi_imaginary", "acc,none", "acc_dcpmi,other",
        "acc_fake,none", "pma,none", "acc_dcpmi_stderr,none", "doc_id", "arguments"]  # fmt: skip


def weird_values() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.sampled_from(LIMITS),
        st.sampled_from(NAMES),
        st.sampled_from(SHAPES),
        st.integers(),
        st.floats(),
        st.text(max_size=8),
    )


@dataclass(frozen=True)
class Mutation:
    """One change to a run's folder; ``apply(folder, file, sandbox)`` makes it, where
    ``file`` is the name of the file it targets in ``folder``."""

    description: str
    apply: Callable[[Path, str, Path], None]


# ---------------------------------------------------------------- JSON values


def node_paths(value: Any, path: tuple = ()) -> list[tuple]:
    found = [path]
    if isinstance(value, dict):
        for key, item in value.items():
            found += node_paths(item, (*path, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found += node_paths(item, (*path, i))
    return found


def get(value: Any, path: tuple) -> Any:
    for key in path:
        value = value[key]
    return value


def replaced(root: Any, path: tuple, new: Any) -> Any:
    if not path:
        return new
    root = copy.deepcopy(root)
    get(root, path[:-1])[path[-1]] = new
    return root


def deleted(root: Any, path: tuple) -> Any:
    root = copy.deepcopy(root)
    del get(root, path[:-1])[path[-1]]
    return root


def shown(value: Any, width: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= width else text[: width - 3] + "..."


def place(path: tuple) -> str:
    return "$" + "".join(f"[{key!r}]" for key in path)


NUMBER_TWEAKS: list[tuple[str, Callable[[float], Any]]] = [
    ("+1", lambda x: x + 1),
    ("-1", lambda x: x - 1),
    ("negated", lambda x: -x),
    ("doubled", lambda x: x * 2),
    ("halved", lambda x: x / 2),
    ("+1e-6", lambda x: x + 1e-6),
    ("as a string", str),
    ("times 10^12", lambda x: x * 10**12),
]
STRING_TWEAKS: list[tuple[str, Callable[[str], Any]]] = [
    ("with '/..' appended", lambda s: s + "/.."),
    ("with '../' in front", lambda s: "../" + s),
    ("with a NUL", lambda s: s + "\x00"),
    ("with a line break", lambda s: s + "\nsecond line"),
    ("cut in half", lambda s: s[: len(s) // 2]),
    ("doubled", lambda s: s + s),
    ("upper-cased", str.upper),
    ("absolute in the sandbox", lambda s: f"{SANDBOX}/{s}"),
    ("'_' as '/'", lambda s: s.replace("_", "/")),
    ("with a trailing space", lambda s: s + " "),
]


@st.composite
def json_edit(draw: Any, root: Any, focus: Callable[[tuple], bool] = lambda p: False) -> tuple:
    """``(description, new_root)``: one value of ``root`` changed (see the module)."""
    paths = node_paths(root)
    important = [p for p in paths if focus(p)]
    choices = st.sampled_from(paths)
    path = draw(st.one_of(st.sampled_from(important), choices) if important else choices)
    value = get(root, path)
    ops = ["replace", "replace", "wrap", "nest"]
    if path:
        ops += ["delete"]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        ops += ["number", "number", "number"]
    if isinstance(value, str):
        ops += ["string", "string"]
        if _numeric(value):
            ops += ["number", "number"]
    if isinstance(value, dict):
        ops += ["add", "clone"] if value else ["add"]
    if isinstance(value, list) and value:
        ops += ["list"]
    op = draw(st.sampled_from(ops))
    where = place(path)
    if op == "replace":
        new = draw(weird_values())
        return f"{where} := {shown(new)}", replaced(root, path, new)
    if op == "delete":
        return f"{where} dropped", deleted(root, path)
    if op == "wrap":
        new = draw(st.sampled_from([[value], {"value": value}]))
        return f"{where} wrapped: {shown(new)}", replaced(root, path, new)
    if op == "nest":
        depth = draw(st.sampled_from([64, 5000]))
        return f"{where} nested in {depth} lists", replaced(root, path, Nested(value, depth))
    if op == "number":
        label, tweak = draw(st.sampled_from(NUMBER_TWEAKS))
        try:
            new = tweak(float(value) if isinstance(value, str) else value)
        except (OverflowError, ValueError):
            new = math.inf
        return f"{where} {label}: {shown(value)} -> {shown(new)}", replaced(root, path, new)
    if op == "string":
        label, tweak = draw(st.sampled_from(STRING_TWEAKS))
        new = tweak(value)
        return f"{where} {label}: {shown(new)}", replaced(root, path, new)
    if op == "add":
        key, new = draw(st.sampled_from(KEYS)), draw(weird_values())
        return f"{where} gains {key!r}: {shown(new)}", replaced(root, path, {**value, key: new})
    if op == "clone":
        source = draw(st.sampled_from(sorted(value, key=str)))
        key = draw(st.sampled_from(["dcpmi_imaginary", "dcpmi_copa", "x/../y", "acc,other"]))
        if key in value:
            return "no change (the clone's name was taken)", root
        new = {**value, key: copy.deepcopy(value[source])}
        return f"{where} gains {key!r}, a copy of {source!r}", replaced(root, path, new)
    # a list
    how = draw(st.sampled_from(["reversed", "last dropped", "first repeated", "emptied"]))
    new = {
        "reversed": value[::-1],
        "last dropped": value[:-1],
        "first repeated": [value[0], *value],
        "emptied": [],
    }[how]
    return f"{where} {how}", replaced(root, path, new)


def _numeric(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


@dataclass(frozen=True)
class Nested:
    """``value`` inside ``depth`` lists (written as text: deeper than ``json`` writes)."""

    value: Any
    depth: int

    def __repr__(self) -> str:
        return f"{shown(self.value, 30)} in {self.depth} lists"


def dumps(value: Any, indent: int | None = None) -> str:
    """JSON as a file holds it (NaN and infinities as Python writes them); lone surrogates
    escaped; ``BIG_INTEGER`` written as its digits, a ``Nested`` value in its lists."""
    nested: list[Nested] = []

    def marked(item: Any) -> Any:
        if isinstance(item, Nested):
            nested.append(item)
            return f"{{nested-{len(nested) - 1}}}"
        if isinstance(item, dict):
            return {k: marked(v) for k, v in item.items()}
        if isinstance(item, list):
            return [marked(v) for v in item]
        return item

    text = json.dumps(marked(value), indent=indent, ensure_ascii=True, allow_nan=True)
    for i, item in enumerate(nested):
        inner = "[" * item.depth + dumps(item.value) + "]" * item.depth
        text = text.replace(json.dumps(f"{{nested-{i}}}"), inner)
    return text.replace(json.dumps(BIG_INTEGER), "1" + "0" * 5000)


# ---------------------------------------------------------------- files


def read_text(path: Path) -> str:
    data = path.read_bytes()
    return (gzip.decompress(data) if path.suffix == ".gz" else data).decode("utf-8")


def write_text(path: Path, text: str, sandbox: Path) -> None:
    write_bytes(path, text.replace(SANDBOX, str(sandbox)).encode("utf-8"))


def write_bytes(path: Path, data: bytes, compress: bool | None = None) -> None:
    if compress if compress is not None else path.suffix == ".gz":
        data = gzip.compress(data, mtime=0)
    path.write_bytes(data)


def _replace_text(text: str) -> Callable[[Path, str, Path], None]:
    def apply(folder: Path, name: str, sandbox: Path) -> None:
        write_text(folder / name, text, sandbox)

    return apply


def results_focus(path: tuple) -> bool:
    """The places of a results file that its readers decide with."""
    top = path[0] if path else None
    if top == "configs":
        return len(path) < 3 or path[2] == "metadata"
    return top in {"results", "n-samples", "dcpmi", "model_name", "config", "versions",
                   "task_hashes", "group_subtasks", "n-shot", "date"}  # fmt: skip


def sample_focus(path: tuple) -> bool:
    return len(path) < 2 or path[0] != "doc"


@st.composite
def results_mutation(draw: Any, text: str) -> Mutation:
    data = json.loads(text)
    description, new = draw(json_edit(data, results_focus))
    return Mutation(f"results {description}", _replace_text(dumps(new, indent=2)))


BAD_LINES = ["garbage", "[]", "null", "{}", '{"doc_id": 0}', '"text"', "   ", "{"]


@st.composite
def samples_mutation(draw: Any, text: str) -> Mutation:
    lines = [json.loads(line) for line in text.splitlines() if line.strip()]
    i = draw(st.integers(0, len(lines) - 1))
    kind = draw(st.sampled_from(["value", "value", "value", "lines"]))
    if kind == "value":
        description, new = draw(json_edit(lines[i], sample_focus))
        lines = [*lines[:i], new, *lines[i + 1 :]]
        texts = [dumps(line) for line in lines]
        return Mutation(f"samples line {i + 1} {description}", _replace_text(_joined(texts)))
    texts = [dumps(line) for line in lines]
    j = draw(st.integers(0, len(lines) - 1))
    how = draw(st.sampled_from(["dropped", "repeated", "swapped", "bad", "cut", "reversed"]))
    if how == "dropped":
        texts, what = texts[:i] + texts[i + 1 :], f"line {i + 1} dropped"
    elif how == "repeated":
        texts, what = texts[: i + 1] + texts[i:], f"line {i + 1} repeated"
    elif how == "swapped":
        texts[i], texts[j] = texts[j], texts[i]
        what = f"lines {i + 1} and {j + 1} swapped"
    elif how == "bad":
        bad = draw(st.sampled_from(BAD_LINES))
        texts, what = texts[:i] + [bad] + texts[i:], f"line {i + 1}: {bad!r} put in"
    elif how == "cut":
        texts, what = texts[:i], f"only the first {i} lines kept"
    else:
        texts, what = texts[::-1], "lines reversed"
    return Mutation(f"samples {what}", _replace_text(_joined(texts)))


def _joined(lines: list[str]) -> str:
    return "".join(line + "\n" for line in lines)


BAD_BYTES = [b"\xff", b"\xfe\xff", b"\xc3", b"\xed\xa0\x80", b"\x80", b"\x00"]


@st.composite
def bytes_mutation(draw: Any, raw: bytes, compressed: bool) -> Mutation:
    """The file's bytes (a gzip file's text, or with ``raw`` its compressed bytes) broken."""
    text = gzip.decompress(raw) if compressed else raw
    on_raw = compressed and draw(st.booleans())
    data = raw if on_raw else text
    kind = draw(st.sampled_from(["cut", "insert", "bom", "empty", "tail", "nest", "crlf"]))
    at = draw(st.integers(0, max(0, len(data) - 1)))
    if kind == "cut":
        new, what = data[:at], f"cut after byte {at} of {len(data)}"
    elif kind == "insert":
        bad = draw(st.sampled_from(BAD_BYTES))
        new, what = data[:at] + bad + data[at:], f"{bad!r} put in at byte {at}"
    elif kind == "bom":
        new, what = b"\xef\xbb\xbf" + data, "a UTF-8 byte-order mark in front"
    elif kind == "empty":
        new, what = b"", "emptied"
    elif kind == "tail":
        new, what = data + b"\n}garbage", "garbage after the end"
    elif kind == "nest":
        new, what = b"[" * 100_000 + data + b"]" * 100_000, "inside 100,000 lists"
    else:
        new, what = data.replace(b"\n", b"\r\n"), "CRLF line ends"
    layer = "compressed bytes" if on_raw else "bytes"

    def apply(folder: Path, name: str, sandbox: Path) -> None:
        write_bytes(folder / name, new, compress=compressed and not on_raw)

    return Mutation(f"{layer} {what}", apply)


SPECIALS = ["fifo", "folder", "dangling link", "link to itself", "link to /dev/null",
            "link to /dev/zero", "link to the other file", "link to a copy"]  # fmt: skip


def make_special(path: Path, kind: str, other: Path | None) -> None:
    """``path`` (removed first, if there) made a special file of ``kind``."""
    original = path.read_bytes() if path.is_file() else b""
    if path.is_symlink() or path.exists():
        path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "folder":
        path.mkdir()
        (path / "inside.json").write_text("{}")
    elif kind == "dangling link":
        path.symlink_to(path.with_name("nothing-here"))
    elif kind == "link to itself":
        path.symlink_to(path.name)
    elif kind == "link to /dev/null":
        path.symlink_to("/dev/null")
    elif kind == "link to /dev/zero":
        path.symlink_to("/dev/zero")
    elif kind == "link to the other file":
        path.symlink_to(other if other is not None else "/dev/null")
    else:  # a regular file elsewhere, with the same bytes
        copy_ = path.parent.parent / f"copy-of-{path.name}"
        copy_.write_bytes(original)
        path.symlink_to(copy_)


@st.composite
def special_mutation(draw: Any, other: str | None) -> Mutation:
    kind = draw(st.sampled_from(SPECIALS))

    def apply(folder: Path, name: str, sandbox: Path) -> None:
        make_special(folder / name, kind, folder / other if other else None)

    return Mutation(f"replaced by a {kind}", apply)


@st.composite
def extra_entry(draw: Any, stamp: str, task: str) -> Mutation:
    """A special file added beside the run's, under a results or samples file's name."""
    name = draw(
        st.sampled_from(
            [
                f"results_{stamp}x.json",
                "results_zzzz.json",
                f"samples_{task}_{stamp}.jsonl",
                f"results_{stamp}.json.tmp",
            ]  # fmt: skip
        )
    )
    kind = draw(st.sampled_from(["fifo", "folder", "link to /dev/zero", "dangling link"]))

    def apply(folder: Path, _name: str, sandbox: Path) -> None:
        if not (folder / name).exists():
            make_special(folder / name, kind, None)

    return Mutation(f"a {kind} named {name} added beside", apply)


TASK_NAMES = ["dcpmi_imaginary", "dcpmi_copa", "my/quiz_dcpmi", "dcpmi_cb/../../../evil",
              "../../../../etc/passwd", "nul\x00task", "line\nbreak", "..", "", " dcpmi_cb",
              "DCPMI_CB", "\ud800", f"{SANDBOX}/task"]  # fmt: skip


def renamed(value: Any, old: str, new: str) -> Any:
    """``value`` with every key and string equal to ``old`` made ``new``."""
    if isinstance(value, dict):
        return {(new if k == old else k): renamed(v, old, new) for k, v in value.items()}
    if isinstance(value, list):
        return [renamed(v, old, new) for v in value]
    return new if value == old else value


@st.composite
def rename_mutation(draw: Any, task: str, samples_name: str | None) -> Mutation:
    new = draw(st.sampled_from(TASK_NAMES))

    def apply(folder: Path, name: str, sandbox: Path) -> None:
        path = folder / name
        data = renamed(json.loads(path.read_text(encoding="utf-8")), task, new)
        write_text(path, dumps(data, indent=2), sandbox)
        if samples_name is None:
            return
        target = new.replace(SANDBOX, str(sandbox))
        moved = samples_name.replace(f"samples_{task}_", f"samples_{target}_")
        if "/" not in target and "\x00" not in target and "\ud800" not in target:
            try:
                (folder / samples_name).rename(folder / moved)
            except OSError:
                pass  # a name the file system refuses: the samples stay where they were

    return Mutation(f"task {task!r} renamed {new!r} in the results (and its samples)", apply)
