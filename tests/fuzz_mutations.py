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
  name can be a file's), to a name with separators, ``..``, a NUL, another task's, or a
  Jinja template.
* **Repeated keys** (``duplicate_key_mutation``): one object of a results file or of a
  samples line, at any depth, holding one of its keys twice (the forged copy first or
  last, the same value or another, the key spelled plainly or with a ``\\u`` escape), written
  as text since ``json`` writes no such object: every command must refuse it.
* **Compression** (``gzip_mutation``): a samples file gzipped again (any level, split into
  several gzip members), padded with whitespace-only lines or one long line (a few bytes to
  past the readers' limits, ``MAX_LINE_BYTES`` a line and ``MAX_LINES_BYTES`` a file, at
  ratios up to ~1,000:1, so a case stays small on disk), with trailing garbage, cut short,
  compressed twice, or holding text that is not UTF-8. Harmless padding and re-compression
  must be accepted, the rest refused.
* **Templates** (``template_mutation``): Jinja (code that would make a file ``MARKER``
  names, loops and powers that never end, an unclosed comment) in one or every string of a
  results file (its configs, metadata, model arguments, chat template, system instruction)
  or of the samples: no template in a file a stranger sends may run.

Each ``Mutation`` says in words what it did (enough to write it again as a regression
test), and what every command must do with it where only one answer is right (``expect``);
``{sandbox}`` in a value is the case's folder, to aim an absolute path inside it.
"""

from __future__ import annotations

import copy
import functools
import gzip
import json
import math
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from lm_eval_dcpmi._json_files import MAX_LINE_BYTES, MAX_LINES, MAX_LINES_BYTES

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
    ``file`` is the name of the file it targets in ``folder``. ``expect``: what every
    command must do with it, ``REFUSED`` or ``ACCEPTED`` (numbers unchanged); ``EITHER``
    where both are right."""

    description: str
    apply: Callable[[Path, str, Path], None]
    expect: str = ""


EITHER, REFUSED, ACCEPTED = "", "refused", "accepted"


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
def rename_mutation(
    draw: Any, task: str, samples_name: str | None, names: list[str] = TASK_NAMES
) -> Mutation:
    new = draw(st.sampled_from(names))

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


# ---------------------------------------------------------------- repeated keys

REPEATED = "{repeated}"


def _key_text(key: str, escaped: bool) -> str:
    """``key`` as a JSON string; ``escaped``: its first character as a ``\\uXXXX`` escape
    (the same key once read, another text to a reader that compares bytes)."""
    text = json.dumps(key, ensure_ascii=True)
    if not escaped or not key or ord(key[0]) > 0xFFFF:
        return text
    return f'"\\u{ord(key[0]):04x}' + json.dumps(key[1:], ensure_ascii=True)[1:]


def dumps_repeating(
    root: Any, path: tuple, key: str, forged: Any, first: bool, escaped: bool
) -> str:
    """``root`` as JSON text (``dumps``), its object at ``path`` holding ``key`` twice: the
    forged copy, ``forged``, before (``first``) or after the genuine pairs."""
    pairs = [f"{json.dumps(k, ensure_ascii=True)}: {dumps(v)}" for k, v in get(root, path).items()]
    extra = f"{_key_text(key, escaped)}: {dumps(forged)}"
    text = "{" + ", ".join([extra, *pairs] if first else [*pairs, extra]) + "}"
    if not path:
        return text
    return dumps(replaced(root, path, REPEATED)).replace(json.dumps(REPEATED), text, 1)


@st.composite
def forged_value(draw: Any, value: Any) -> tuple[str, Any]:
    """``(description, value)``: the forged copy's value, the genuine one or another."""
    how = draw(st.sampled_from(["same", "same", "number", "weird"]))
    if how == "number" and isinstance(value, (int, float)) and not isinstance(value, bool):
        label, tweak = draw(st.sampled_from(NUMBER_TWEAKS))
        try:
            new = tweak(value)
        except (OverflowError, ValueError):
            new = math.inf
        return f"the value {label}: {shown(new)}", new
    if how in ("number", "weird"):
        new = draw(weird_values())
        return f"the value {shown(new)}", new
    return "the same value", copy.deepcopy(value)


@st.composite
def repeated_key(draw: Any, root: Any, focus: Callable[[tuple], bool]) -> tuple[str, str]:
    """``(description, text)``: ``root`` as JSON text with one key of one of its objects
    (any depth; the ``focus`` places more often) written twice."""
    objects = [p for p in node_paths(root) if isinstance(get(root, p), dict) and get(root, p)]
    important = [p for p in objects if focus(p)]
    choices = st.sampled_from(objects)
    path = draw(st.one_of(st.sampled_from(important), choices) if important else choices)
    target = get(root, path)
    key = draw(st.sampled_from(sorted(target, key=str)))
    label, forged = draw(forged_value(target[key]))
    first, escaped = draw(st.booleans()), draw(st.booleans())
    text = dumps_repeating(root, path, key, forged, first, escaped)
    where = "before" if first else "after"
    spelled = ", its key spelled with a \\u escape" if escaped else ""
    return f"{place((*path, key))} repeated {where} the genuine one ({label}{spelled})", text


def repeat_focus(path: tuple) -> bool:
    """The objects of a results file whose repeated keys matter most: its results, configs
    (metadata too), model arguments, counts and digests."""
    return results_focus(path) or path[:1] == ("configs",)


@st.composite
def duplicate_key_mutation(draw: Any, text: str, lines: bool) -> Mutation:
    """A results file (or with ``lines`` one line of a samples file: its metric values, its
    doc's fields) holding one key twice in one object; every command must refuse it."""
    if not lines:
        description, new = draw(repeated_key(json.loads(text), repeat_focus))
        return Mutation(f"results {description}", _replace_text(new), REFUSED)
    samples = [json.loads(line) for line in text.splitlines() if line.strip()]
    i = draw(st.integers(0, len(samples) - 1))
    description, new = draw(repeated_key(samples[i], sample_focus))
    texts = [dumps(sample) for sample in samples]
    texts[i] = new
    return Mutation(f"samples line {i + 1} {description}", _replace_text(_joined(texts)), REFUSED)


# ---------------------------------------------------------------- compression


@dataclass(frozen=True)
class Padding:
    """``piece`` ``count`` times, inside a gzip stream (``gzipped``)."""

    piece: bytes
    count: int

    def __repr__(self) -> str:
        return f"{self.count:,} x {shown(self.piece, 20)}"


@functools.lru_cache(maxsize=32)
def _padding_members(piece: bytes, count: int) -> bytes:
    """``piece * count`` gzipped as members of about 1 MiB each (the same member again and
    again): a MiB of spaces is ~1 KB on disk, made in milliseconds whatever the count."""
    per = max(1, 2**20 // len(piece))
    full, rest = divmod(count, per)
    member = gzip.compress(piece * per, 9, mtime=0) if full else b""
    return member * full + (gzip.compress(piece * rest, 9, mtime=0) if rest else b"")


def gzipped(parts: Iterable[bytes | Padding]) -> bytes:
    """``parts`` as one gzip stream of consecutive members, a member (or more, for a
    ``Padding``) each: what a reader must read as the parts' bytes joined."""
    return b"".join(
        _padding_members(p.piece, p.count)
        if isinstance(p, Padding)
        else gzip.compress(p, 9, mtime=0)
        for p in parts
    )


def _write_gzip(data: bytes) -> Callable[[Path, str, Path], None]:
    """Write ``data`` as the samples file, named ``.jsonl.gz`` (the ``.jsonl`` removed)."""

    def apply(folder: Path, name: str, sandbox: Path) -> None:
        target = name if name.endswith(".gz") else name + ".gz"
        if target != name:
            (folder / name).unlink()
        (folder / target).write_bytes(data)

    return apply


WHITESPACE = ["", " ", "\t", "\r", " \t\r "]  # a line of JSON's whitespace alone
# 2**27: 128 MiB of line ends (~130 KB gzipped), past MAX_LINES
BLANK_LINES = [1, 7, 1000, 2**20, 2**27]
LONG_LINES = [2**10, 2**20, MAX_LINE_BYTES - 1, MAX_LINE_BYTES, 70 * 2**20]  # with its "\n"
TRAILERS = [b"garbage\n", b"\x00" * 1024, b"\x1f\x8b", b"\x1f\x8b\x08\x00" + b"\x00" * 6,
            gzip.compress(b'{"doc_id": 0}\n', 9, mtime=0)[:-8], b"PK\x03\x04"]  # fmt: skip
NOT_UTF8 = [b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xc0\xaf", b"\x80"]
GZIP_KINDS = ["recompressed", "members", "blank lines", "blank lines", "long line",
              "padded sample", "past the limit", "garbage after", "cut", "not UTF-8",
              "gzipped twice", "not gzip"]  # fmt: skip


@st.composite
def gzip_mutation(draw: Any, text: str) -> Mutation:
    """The samples file (``text``, uncompressed) written as ``samples_*.jsonl.gz`` in one of
    ``GZIP_KINDS``' ways (see the module): harmless ones must be accepted (whitespace-only
    lines are no samples; a line or the file within the limits), the rest refused."""
    data = text.encode("utf-8")
    lines = [chunk + b"\n" for chunk in data.rstrip(b"\n").split(b"\n")]
    at = draw(st.integers(0, len(lines)))
    head, tail = b"".join(lines[:at]), b"".join(lines[at:])
    kind = draw(st.sampled_from(GZIP_KINDS))
    if kind == "recompressed":
        level = draw(st.integers(0, 9))
        new, what, expect = gzip.compress(data, level, mtime=0), f"at level {level}", ACCEPTED
    elif kind == "members":
        cuts = sorted(draw(st.lists(st.integers(0, len(data)), min_size=1, max_size=4)))
        parts = [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]
        new, what, expect = gzipped(parts), f"in {len(parts)} members, cut at {cuts}", ACCEPTED
    elif kind == "blank lines":
        blank, count = draw(st.sampled_from(WHITESPACE)), draw(st.sampled_from(BLANK_LINES))
        new = gzipped([head, Padding((blank + "\n").encode(), count), tail])
        what = f"{count:,} lines of {blank!r} put in before line {at + 1}"
        # past MAX_LINES (blank ones count: each costs a step to read) the file is refused
        expect = ACCEPTED if count + len(lines) <= MAX_LINES else REFUSED
    elif kind == "long line":
        size = draw(st.sampled_from(LONG_LINES))
        new = gzipped([head, Padding(b" ", size), b"\n", tail])
        what = f"a line of {size:,} spaces put in before line {at + 1}"
        expect = ACCEPTED if size + 1 <= MAX_LINE_BYTES else REFUSED
    elif kind == "padded sample":
        i = min(at, len(lines) - 1)
        size, before = draw(st.sampled_from(LONG_LINES)), draw(st.booleans())
        line = lines[i][:-1]
        padded = [Padding(b" ", size), line] if before else [line, Padding(b" ", size)]
        rest = b"".join(lines[i + 1 :])
        new = gzipped([b"".join(lines[:i]), *padded, b"\n" + rest])
        what = f"line {i + 1} padded with {size:,} spaces {'before' if before else 'after'} it"
        expect = ACCEPTED if len(line) + size + 1 <= MAX_LINE_BYTES else REFUSED
    elif kind == "past the limit":  # ~10 s a read: 2 GiB decompressed
        count = MAX_LINES_BYTES // 2**20 + 1
        new = gzipped([head, Padding(b" " * (2**20 - 1) + b"\n", count), tail])
        what, expect = f"{count:,} lines of a MiB of spaces put in before line {at + 1}", REFUSED
    elif kind == "garbage after":
        trailer = draw(st.sampled_from(TRAILERS))
        new, what, expect = gzipped([data]) + trailer, f"then {shown(trailer, 30)}", EITHER
    elif kind == "cut":
        whole = gzipped([data])
        end = draw(st.integers(0, len(whole) - 1))
        new, what, expect = whole[:end], f"cut after {end} of its {len(whole)} bytes", REFUSED
    elif kind == "not UTF-8":
        how = draw(st.sampled_from(["utf-16", "utf-32", *map(repr, NOT_UTF8)]))
        where = draw(st.integers(0, len(data)))
        if how.startswith("utf"):
            plain, what = text.encode(how), f"of text in {how.upper()}"
        else:
            bad = NOT_UTF8[[repr(b) for b in NOT_UTF8].index(how)]
            plain, what = data[:where] + bad + data[where:], f"of {how} put in at byte {where}"
        new, expect = gzipped([plain]), REFUSED
    elif kind == "gzipped twice":
        new, what, expect = gzipped([gzipped([data])]), "inside another gzip", REFUSED
    else:
        new, what, expect = data, "not compressed at all", REFUSED
    return Mutation(f"gzipped, {what}", _write_gzip(new), expect)


# ---------------------------------------------------------------- templates

MARKER = "DCPMI_FUZZ_MARKER"  # a file a template that runs code would make (fuzz_helpers)
TEMPLATES = [
    "{{ cycler.__init__.__globals__.os.system('touch " + SANDBOX + "/" + MARKER + "') }}",
    "{{ cycler.__init__.__globals__.os.system('touch " + MARKER + "') }}",
    "{{ lipsum.__globals__['os'].popen('touch " + MARKER + "-popen').read() }}",
    "{{ joiner.__init__.__globals__.__builtins__.open('" + MARKER + "-open', 'w') }}",
    "{{ ''.__class__.__mro__[1].__subclasses__() }}",
    "{{ self.__init__.__globals__ }}",
    "{% for i in range(9) %}x{% endfor %}",
    "{% for i in range(99999) %}{% for j in range(99999) %}x{% endfor %}{% endfor %}",
    "{{ 9**(9**9) }}",
    "{{ 'x' * 10**10 }}",
    "{#",
    "{{",
    "{% raw %}",
    "{{ premise }}{{ undefined_name }}",
    "{% include '/etc/passwd' %}",
    "{% import 'os' as os %}",
]


def template_places(root: Any) -> list[tuple]:
    """The places of a results file a run records text in that a reader may render: each
    task's metadata (the premise, its option, its YAML's path) and the run's model
    arguments, chat template and system instruction (there or not, text or not)."""
    configs = root.get("configs") if isinstance(root.get("configs"), dict) else {}
    places = [("chat_template",), ("system_instruction",), ("config", "model_args")]
    for task, config in configs.items():
        if isinstance(config, dict) and isinstance(config.get("metadata"), dict):
            for key in ("dcpmi_task", "domain_premise", "config_source", "pretrained"):
                places.append(("configs", task, "metadata", key))
        if isinstance(config, dict):
            places += [("configs", task, "doc_to_text"), ("configs", task, "description")]
    return places


def _templated(value: Any, payload: str, append: bool) -> str:
    return value + payload if append and isinstance(value, str) else payload


def with_template(root: Any, paths: Iterable[tuple], payload: str, append: bool) -> Any:
    """``root`` with the string at each of ``paths`` (made where absent, if its object is
    there) replaced by ``payload``, or ``payload`` appended to it."""
    root = copy.deepcopy(root)
    for path in paths:
        try:
            parent = get(root, path[:-1])
        except (KeyError, IndexError, TypeError):
            continue
        if isinstance(parent, dict) or (isinstance(parent, list) and path[-1] < len(parent)):
            old = parent.get(path[-1]) if isinstance(parent, dict) else parent[path[-1]]
            parent[path[-1]] = _templated(old, payload, append)
    return root


def string_paths(value: Any) -> list[tuple]:
    return [p for p in node_paths(value) if isinstance(get(value, p), str)]


@st.composite
def template_mutation(draw: Any, text: str, lines: bool) -> Mutation:
    """Jinja (``TEMPLATES``) in one string or every string of a results file (its
    ``template_places`` too), or with ``lines`` of one line or every line of a samples file
    (its doc's fields, its requests, its target): replacing the string or appended."""
    payload = draw(st.sampled_from(TEMPLATES))
    append = draw(st.booleans())
    every = draw(st.booleans())
    how = f"{shown(payload, 50)} {'appended to' if append else 'in place of'}"
    if not lines:
        root = json.loads(text)
        places = template_places(root)
        if every:
            paths, where = string_paths(root) + places, "every string"
        else:
            path = draw(st.sampled_from(places + string_paths(root)))
            paths, where = [path], place(path)
        new = with_template(root, paths, payload, append)
        return Mutation(f"results: {how} {where}", _replace_text(dumps(new, indent=2)))
    samples = [json.loads(line) for line in text.splitlines() if line.strip()]
    i = draw(st.integers(0, len(samples) - 1))
    if every:
        samples = [with_template(s, string_paths(s), payload, append) for s in samples]
        where = "every string of every line"
    else:
        path = draw(st.sampled_from(string_paths(samples[i]) or [("doc",)]))
        samples[i] = with_template(samples[i], [path], payload, append)
        where = f"line {i + 1} {place(path)}"
    texts = [dumps(sample) for sample in samples]
    return Mutation(f"samples: {how} {where}", _replace_text(_joined(texts)))
