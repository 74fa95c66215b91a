"""The lowered Python frees values exactly where the executor does: both are traced, and the values
alive before each instruction (and at each block's end) must be the same, in the same order, on
functions with Ifs (values read in one branch only, nested branches), module calls and tuples."""

from __future__ import annotations

import importlib.util
import inspect
import itertools
import sys
from pathlib import Path

import numpy as np
import pytest

import retrograd
from retrograd.ir.expr import Function
from retrograd.runtime import interp
from codegen.helpers import make_inputs

ROOT = Path(__file__).resolve().parents[2]

BRANCHES = """
@I.ir_module
class Module:
    @R.function
    def pair(x: R.Tensor((3,), dtype="float32")) -> R.Tuple(R.Tensor((3,), dtype="float32"), R.Tensor((3,), dtype="float32")):
        a = R.exp(x)
        b = R.negative(x)
        return (a, b)

    @R.function
    def main(c: R.Tensor((), dtype="bool"), d: R.Tensor((), dtype="bool"), x: R.Tensor((3,), dtype="float32"),
             y: R.Tensor((3,), dtype="float32"), unused: R.Tensor((3,), dtype="float32")) -> R.Tuple(R.Tensor((3,), dtype="float32"), R.Tensor((3,), dtype="float32")):
        cls = Module
        t = cls.pair(x)
        u = t[0]
        v = R.multiply(t[1], y)
        w = R.add(u, x)
        p = (w, v)
        dead = R.sin(y)
        if c:
            if d:
                z = R.add(p[0], y)
            else:
                z = R.exp(v)
            q = R.multiply(z, u)
        else:
            q = R.sin(w)
        s = R.add(q, x)
        return (s, p[1])
"""


def _keys(value, out: set) -> None:
    """Content keys of the arrays in a value (tuples flattened): which values are alive, by value.
    Read-only arrays are module constants (or views of them): registers to the executor, globals to
    the lowered code, never freed by either, so left out."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, tuple | list):
            stack.extend(v)
        elif isinstance(v, np.ndarray | np.generic):  # the executor holds a scalar argument as a 0-d array
            v = np.asarray(v)
            if v.flags.writeable:
                out.add((v.shape, v.dtype.str, v.tobytes()))


def _deduped(states: list) -> list:
    return [s for s, _ in itertools.groupby(states)]


def executor_states(mod, name, args) -> list:
    """Alive values before each instruction the executor runs and at each block's end: the registers
    of every running function, read where run_code's loop takes its next instruction."""
    lines, start = inspect.getsourcelines(interp.run_code)
    loop_line = start + next(i for i, line in enumerate(lines) if line.strip() == "for ins in code:")
    code = interp.run_code.__code__
    states = []

    def local(frame, event, arg):
        if event == "line" and frame.f_lineno == loop_line:
            alive: set = set()
            f = frame
            while f is not None:
                if f.f_code is code:
                    _keys(f.f_locals["regs"], alive)
                f = f.f_back
            states.append(frozenset(alive))
        return local

    ex = retrograd.build(mod)
    sys.settrace(lambda frame, event, arg: local if frame.f_code is code else None)
    try:
        ex[name](*args)
    finally:
        sys.settrace(None)
    return _deduped(states)


def lowered_states(mod, name, args, tmp_path) -> list:
    """The same for the lowered Python: the locals of every running lowered function, before each
    statement that runs an instruction, tests a condition or hands a block's result on (`del`s and the
    preamble excluded)."""
    path = tmp_path / "lowered_frees.py"
    path.write_text(retrograd.lower_to_python(mod))
    spec = importlib.util.spec_from_file_location("lowered_frees", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    text = path.read_text().splitlines()
    filename = str(path)
    states = []

    def counted(line: str) -> bool:
        s = line.strip()
        return not (s.startswith(("del ", "with ", "def ")) or "# symbolic dim" in s)

    def local(frame, event, arg):
        if event == "line" and counted(text[frame.f_lineno - 1]):
            alive: set = set()
            f = frame
            while f is not None:
                if f.f_code.co_filename == filename:
                    for v in f.f_locals.values():
                        _keys(v, alive)
                f = f.f_back
            states.append(frozenset(alive))
        return local

    fn = getattr(module, name)
    sys.settrace(lambda frame, event, arg: local if frame.f_code.co_filename == filename else None)
    try:
        fn(*args)
    finally:
        sys.settrace(None)
    return _deduped(states)


def _check(mod, name, args, tmp_path):
    want = executor_states(mod, name, args)
    got = lowered_states(mod, name, args, tmp_path)
    assert len(want) > 1
    assert got == want


@pytest.mark.parametrize("c, d", [(True, True), (True, False), (False, True)])
def test_frees_agree_with_ifs_calls_and_tuples(tmp_path, c, d):
    mod = retrograd.parse(BRANCHES)
    rng = np.random.default_rng(7)
    x, y, unused = (rng.standard_normal(3).astype("float32") for _ in range(3))
    _check(mod, "main", [np.array(c), np.array(d), x, y, unused], tmp_path)


CORPUS = ["c16_if_else", "c17_nested_if", "c23_module_calls_cls", "c25_recursion", "c45_tuple_params_calls",
          "c46_if_tuple_result"]


@pytest.mark.parametrize("stem", CORPUS)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_frees_agree_on_corpus_modules(tmp_path, stem, seed):
    mod = retrograd.parse_file(ROOT / "tests" / "corpus" / f"{stem}.py")
    func = mod["main"]
    assert isinstance(func, Function)
    args = make_inputs(func, np.random.default_rng(seed))
    _check(mod, "main", args, tmp_path)
