"""Reading one asv JSON file without trusting it: bounded in size and depth, never via a link.

What cannot be read raises :class:`Unusable` with a :class:`~ltx2k.history.records.Problem`
kind and a sentence a human can act on; :mod:`ltx2k.history.records` files it as a Problem.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import stat
from pathlib import Path

from ltx2k.history import fields

# asv stores the API version in every file; these are the versions asv 0.6 writes.
RESULTS_API_VERSION = 2
MACHINE_API_VERSION = 1
BENCHMARKS_API_VERSION = 2

# Bounds on what is read at all. A result file of the whole suite is well under
# a megabyte; asv's files nest five levels deep and hold no integer longer than
# a millisecond date. Past these, a file is hostile or broken, and parsing it
# would exhaust memory, the parser's recursion, or Python's int-digit limit.
MAX_FILE_BYTES = 64 * 2**20
MAX_JSON_DEPTH = 64
MAX_INT_DIGITS = 40


class Unusable(Exception):
    """Why a file cannot be used: a Problem ``kind`` and its ``message``."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind
        self.message = message


def read_asv_file(path: Path, what: str, version: int) -> dict:
    """The JSON object of asv format *version* in *path* (*what* names it in messages).

    Raises :class:`Unusable` for a file that is not a regular one, too large, not
    UTF-8, empty, cut short, not JSON, not an object, or of another format version.
    """
    data = _read_json(path, what)
    if not isinstance(data, dict):
        raise Unusable(
            "corrupt",
            f"{what.capitalize()} {path} holds a JSON {type(data).__name__}, not an object.",
        )
    version_read = data.get("version")
    if version_read != version:
        raise Unusable(
            "wrong-version",
            f"{what.capitalize()} {path} has format version {version_read!r}; this asv "
            f"reads version {version} (run `asv update`, or use a matching asv).",
        )
    return data


def peek(
    path: Path, machine: str | None = None, gpu: str | None = None
) -> tuple[str, int, str] | None:
    """(commit, date, env name) of a result file, or None where any of them is unusable
    or the file cannot give results: another format version, no benchmark results (a run
    killed before its first benchmark finished), or measured on another *machine* than
    the directory it sits in, or on another GPU than *gpu*, the one its machine.json
    names. A window counts a commit as measured only by files that load, as the full
    load counts them."""
    try:
        data = parse_json(_read_bytes(path).decode("utf-8"))
    except Exception:  # any reason: the full load reports it
        return None
    if not isinstance(data, dict) or data.get("version") != RESULTS_API_VERSION:
        return None
    results, params = data.get("results"), data.get("params")
    if not isinstance(results, dict) or not results:
        return None
    if machine is not None and (not isinstance(params, dict) or params.get("machine") != machine):
        return None
    if fields.other_gpu(params, gpu) is not None:
        return None
    commit, date, env = data.get("commit_hash"), data.get("date"), data.get("env_name")
    if not isinstance(commit, str) or not fields.COMMIT_HASH.fullmatch(commit):
        return None
    if fields.number(date, fields.MIN_DATE_MS, fields.MAX_DATE_MS) is None:
        return None
    return commit, int(date), env if isinstance(env, str) else ""


def parse_json(text: str):
    """``json.loads`` with nesting depth and integer size bounded (ValueError past them)."""
    depth = _nesting(text)
    if depth > MAX_JSON_DEPTH:
        raise ValueError(f"JSON nested more than {MAX_JSON_DEPTH} levels deep")
    return json.loads(text, parse_int=_bounded_int)


def _read_json(path: Path, what: str):
    """Parse one JSON file; raises Unusable saying why it cannot be parsed."""
    try:
        text = _read_bytes(path).decode("utf-8")
    except _NotRegular as e:
        raise Unusable(
            # a directory is what the OS itself refuses to read (EISDIR)
            "unreadable" if str(e) == "directory" else "not-a-file",
            f"{what.capitalize()} {path} is a {e}, not a regular file; it is not read "
            "(a link could point anywhere on this host, a FIFO would block).",
        ) from None
    except _TooLarge as e:
        raise Unusable(
            "too-large",
            f"{what.capitalize()} {path} is {e} bytes, over the {MAX_FILE_BYTES} bytes "
            "an asv file can reasonably hold; it is not read.",
        ) from None
    except OSError as e:
        raise Unusable("unreadable", f"Cannot read {what} {path}: {e}.") from None
    except UnicodeDecodeError as e:
        raise Unusable(
            "corrupt",
            f"{what.capitalize()} {path} is not text (invalid UTF-8 at byte {e.start}); "
            "it is not an asv file or was overwritten with binary data.",
        ) from None
    if not text.strip():
        raise Unusable(
            "truncated",
            f"{what.capitalize()} {path} is empty (0 bytes of JSON); the run that "
            "wrote it was probably interrupted.",
        )
    try:
        return parse_json(text)
    except json.JSONDecodeError as e:
        # The parser ran off the end of the input: the file was cut short
        # (disk full, killed runner, partial copy), not scrambled.
        if _cut_short(text, e.pos):
            raise Unusable(
                "truncated",
                f"{what.capitalize()} {path} is truncated: its JSON stops after "
                f"{len(text)} bytes ({e.msg}); the run that wrote it was probably "
                "interrupted.",
            ) from None
        raise Unusable(
            "corrupt",
            f"{what.capitalize()} {path} is not valid JSON ({e.msg} at line "
            f"{e.lineno}, column {e.colno}).",
        ) from None
    except (ValueError, RecursionError) as e:
        raise Unusable(
            "corrupt", f"{what.capitalize()} {path} is not an asv file: {e}; it is not read."
        ) from None


# JSON literals asv writes (Python's json writes NaN and Infinity for float specials).
_LITERALS = ("true", "false", "null", "NaN", "Infinity", "-Infinity")


def _cut_short(text: str, pos: int) -> bool:
    """Whether a JSON error at ``pos`` means the text stops early: the parser ran off the
    end, or what is left from ``pos`` is one token cut mid-way (the parser reports a cut
    literal or string at its first character and a cut number at its "." or "e")."""
    rest = text[pos:].rstrip()
    if not rest:
        return True
    if any(lit.startswith(rest) for lit in _LITERALS):
        return True
    # a number cut after its "." or exponent mark: the parser stops at that character
    if re.fullmatch(r"[-+.eE0-9]+", rest):
        return True
    # an unterminated string: no unescaped closing quote after the opening one
    return rest.startswith('"') and re.search(r'(?<!\\)"', rest[1:]) is None


def _file_type(mode: int) -> str:
    for test, name in (
        (stat.S_ISLNK, "symbolic link"),
        (stat.S_ISFIFO, "FIFO"),
        (stat.S_ISSOCK, "socket"),
        (stat.S_ISCHR, "character device"),
        (stat.S_ISBLK, "block device"),
        (stat.S_ISDIR, "directory"),
    ):
        if test(mode):
            return name
    return "special file"


def _read_bytes(path: Path) -> bytes:
    """A regular file's bytes, never through a link and never blocking on a FIFO.

    Raises _NotRegular (its file type) or _TooLarge (its size), or OSError.
    """
    mode = path.lstat().st_mode
    if not stat.S_ISREG(mode):
        raise _NotRegular(_file_type(mode))
    # O_NONBLOCK and O_NOFOLLOW: swapped for a FIFO or a link since the lstat, the
    # open neither waits for a writer nor follows; fstat then tells what was opened.
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    with os.fdopen(fd, "rb") as f:
        mode = os.fstat(f.fileno()).st_mode
        if not stat.S_ISREG(mode):
            raise _NotRegular(_file_type(mode))
        data = f.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        raise _TooLarge(path.stat().st_size)
    return data


class _NotRegular(Exception):
    pass


class _TooLarge(Exception):
    pass


_JSON_STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"')
# Every byte but the four brackets; a bracket is one byte in UTF-8, never inside another
# character's bytes.
_NOT_BRACKET = bytes(b for b in range(256) if b not in b"[]{}")
_DEPTH_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}


def _nesting(text: str) -> int:
    """How deep the JSON nests, counted before parsing (the parser recurses per level):
    the highest running count of opening less closing brackets outside strings."""
    brackets = (
        _JSON_STRING.sub("", text).encode("utf-8", "surrogatepass").translate(None, _NOT_BRACKET)
    )
    return max(itertools.accumulate(map(_DEPTH_STEP.__getitem__, brackets), initial=0))


def _bounded_int(digits: str) -> int:
    if len(digits.lstrip("-")) > MAX_INT_DIGITS:
        raise ValueError(
            f"an integer of {len(digits.lstrip('-'))} digits (at most {MAX_INT_DIGITS})"
        )
    return int(digits)


def is_regular(path: Path) -> bool:
    """Whether *path* itself, not what a link points to, is a regular file: the only files
    the store, the loader's callers and the publisher ever read."""
    try:
        return stat.S_ISREG(path.lstat().st_mode)
    except OSError:
        return False
