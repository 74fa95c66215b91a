"""lark's analysed grammar kept as JSON in the user's cache dir (never pickle): ~5 ms to load, not ~45 ms to build."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

import lark
from lark import Lark
from lark.grammar import Rule
from lark.lexer import TerminalDef

# Bump when the stored layout changes; lark's version and the grammar text are part of the key too.
_FORMAT = 1


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "retrograd"


def load_or_build(grammar: str, lexer: type, transformer, **options) -> Lark:
    """The LALR parser for `grammar`: from the cache when a valid entry exists, else built and stored.

    The entry is JSON read back through lark's own deserializer (`Lark._load_from_dict`, what lark's
    standalone generator uses; pinned in pyproject.toml): any problem reading it means a fresh build.
    """
    key = hashlib.sha256(repr((_FORMAT, lark.__version__, sorted(options.items()), grammar)).encode()).hexdigest()
    path = cache_dir() / f"grammar-{key[:32]}.json"
    try:
        return _load(path, key, lexer, transformer)
    except (OSError, ValueError, KeyError, TypeError, AttributeError, IndexError):
        pass
    parser = Lark(grammar, lexer=lexer, transformer=transformer, **options)
    try:
        _store(parser, path, key)
    except (OSError, TypeError, ValueError):  # a read-only home: build every time
        pass
    return parser


def _load(path: Path, key: str, lexer: type, transformer) -> Lark:
    with open(path, encoding="utf-8") as f:
        if hasattr(os, "getuid") and os.fstat(f.fileno()).st_uid != os.getuid():
            raise ValueError("cache entry owned by another user")
        doc = json.load(f)
    if doc.get("key") != key:
        raise ValueError("stale cache entry")
    data, memo = _decode(doc["data"]), _decode(doc["memo"])
    # The lexer class and transformer are code: never stored, supplied here.
    data["options"]["lexer"] = lexer
    data["parser"]["lexer_conf"]["lexer_type"] = lexer
    return Lark._load_from_dict(data, memo, transformer=transformer)


def _store(parser: Lark, path: Path, key: str) -> None:
    data, memo = parser.memo_serialize([TerminalDef, Rule])
    text = json.dumps({"key": key, "data": _encode(data), "memo": _encode(memo)}, separators=(",", ":"))
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def _encode(x):
    """JSON for lark's serialized data: dicts with int keys become {"__pairs__": [[k, v], ...]}."""
    if isinstance(x, dict):
        if all(isinstance(k, str) for k in x):
            return {k: _encode(v) for k, v in x.items()}
        return {"__pairs__": [[_encode(k), _encode(v)] for k, v in x.items()]}
    if isinstance(x, list | tuple):
        return [_encode(v) for v in x]
    if x is None or isinstance(x, str | int | float | bool):
        return x
    return None  # the lexer class and transformer: supplied again on load


def _decode(x):
    if isinstance(x, dict):
        if len(x) == 1 and "__pairs__" in x:
            return {_decode(k): _decode(v) for k, v in x["__pairs__"]}
        return {k: _decode(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_decode(v) for v in x]
    return x
