"""Grammar-aware fuzzer of the parser, printer and verifier: mutated corpus scripts must parse into a
module that verifies and round-trips through print and parse, or fail with a located DiagnosticError.

    python tools/fuzz.py --inputs 100000 --seed 1 --timeout 5      # by hand (a worker process)
    python tools/fuzz.py --inputs 2000 --in-process                 # what the test suite runs

Each input is counted once: accepted (and checked), a located error, another exception (a bug), a hang
(over --timeout CPU seconds), a parse-print-parse mismatch (of the text, or of any pass's output), or a
parser/well_formed disagreement; a located error must name the binding it is in, and a byte-order mark
must not move it. Inputs include empty shapes through every pass, scalars as TVM prints them and window
attributes far beyond the data. Failing inputs are written to --save-dir for replay (`--replay FILE`).
"""

from __future__ import annotations

import argparse
import math
import multiprocessing as mp
import os
import random
import re
import signal
import sys
import time
import traceback
import warnings
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

CORPUS_DIRS = [ROOT / "tests" / "corpus", ROOT / "examples"]
# A file no input may ever create: the payloads below try to.
SENTINEL = Path(os.environ.get("TMPDIR", "/tmp")) / f"retrograd-fuzz-pwned-{os.getuid() if hasattr(os, 'getuid') else 0}"
PAYLOADS = [
    f"__import__('os').system('touch {SENTINEL}')",
    f"open('{SENTINEL}', 'w')",
    f"exec(\"open('{SENTINEL}','w')\")",
    f"eval(\"__import__('os').system('touch {SENTINEL}')\")",
]
_TOKEN = re.compile(r'"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\'|[A-Za-z_][A-Za-z0-9_.]*|\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|\S')
LOOKALIKES = {
    "a": ["а", "ɑ"], "e": ["е"], "o": ["о", "ο"], "x": ["х", "×"], "R": ["Ｒ", "Ꭱ"], "T": ["Т"], "0": ["０", "٠"],
    "1": ["１", "¹", "١"], "3": ["٣", "³"], "2": ["²"], "(": ["（"], ")": ["）"], ",": ["，"], ".": ["·", "．"],
    '"': ["“", "”"], " ": ["\u00a0", "\u3000", "\u200b"], "=": ["＝"], "-": ["−", "‐"], "_": ["＿"],
}
LINE_BREAKS = ["\r", "\r\n", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029", "\n\n", "\\\n", "\t"]
SPECIAL_LITERALS = [
    "0", "-0", "1e999", "-1e999", "1e-999", "9" * 5000, "9" * 30, str(2**63), str(2**64), str(-(2**63) - 1), "0.0",
    'float("nan")', 'float("inf")', '-float("inf")', "True", "None", '""', '"\\x"', '"\\U0010ffff"', '"\\N{BULLET}"',
    "[]", "()", "{}", "[[]]", "T.int64(5)", "T.int8(1000)", "T.uint8(-1)", 'T.int64("a")', "-1", "100000000",
    "2147483648", "1.5", "-2.5e10", '"\\101\\a"', '"²"', '"٣"', '"n + 1"', '"-1"', "((1,),)",
]
# Scalars as TVM's printer writes them (FloatImm: non-finite values as strings, doubles in full).
TVM_SCALARS = [
    'T.float64("inf")', 'T.float32("-inf")', 'T.float16("nan")', 'T.float32("nan")', 'T.float64("-inf")',
    'T.bfloat16("inf")', "T.float32(9.9999999999999998e-46)", "T.float16(0.10000000000000001)", "T.float64(-0.0)",
    "T.float64(" + str(int(1e300)) + ".0)", "T.bool(True)", "T.int8(-128)", "T.uint8(255)", "T.int64(9223372036854775807)",
    "T.float32(3.4028234663852886e+38)", "T.float32(3.4028235677973366e+38)", 'T.float32("x")', 'T.int64("inf")',
]
SPECIAL_LITERALS += TVM_SCALARS
# Attribute magnitudes that reach the kernels: windows, strides, padding and dilation far beyond the data.
MAGNITUDES = [0, 1, 1, 2, 3, 5, 1000, 100000, 10**7, 2**31, 2**40]
MAX_WINDOW_OUTPUT = 2**16  # elements of a window op's result the fuzzer asks for (see window_op)


def _output_elements(text: str) -> int:
    """Elements of `y` in a window_op input (0 when it does not parse or its shape is not static)."""
    import retrograd

    try:
        mod = retrograd.parse(text)
    except Exception:  # noqa: BLE001 - a located error is an outcome of its own; size does not matter
        return 0
    for b in mod["main"].body.blocks[0].bindings if mod["main"].body.blocks else ():
        shape = getattr(b.var.struct_info, "shape", None)
        if b.var.name_hint == "y" and shape is not None and all(isinstance(d, int) for d in shape):
            return math.prod(shape)
    return 0
# Static shapes with an empty dim, for creation ops and annotations.
EMPTY_SHAPES = ["[0]", "[0, 0]", "[2, 0]", "[0, 5]", "[1, 0, 2, 2]", "[1, 4, 0, 0]", "[0, 1, 1]"]
BYTES = "()[]{},:=.+-*/%\"'#\\@\n\t \x00\x7f\ufeff\ud800é😀$`!?;<>|&^~"


def load_corpus() -> list[str]:
    texts = []
    for d in CORPUS_DIRS:
        texts.extend(p.read_text(encoding="utf-8") for p in sorted(d.glob("*.py")))
    return texts


def _ops() -> list:
    from retrograd.ops.registry import all_ops

    return sorted(all_ops(), key=lambda op: op.script_name)


# Values that often fit an attribute of this name: the call then reaches inference and the kernel.
PLAUSIBLE = {
    "axis": ["-1", "0", "1", "None"], "axes": ["[0]", "[-1]", "[0, 1]", "None"], "dtype": ['"float32"', '"int64"'],
    "keepdims": ["True", "False"], "pool_size": ["[2, 2]", "[1, 1]"], "strides": ["[1, 1]", "[2, 2]"],
    "padding": ["[0, 0]", "[1, 1, 1, 1]"], "dilation": ["[1, 1]"], "indices_or_sections": ["2", "[1, 3]"],
    "reduction": ['"mean"', '"sum"', '"none"'], "mode": ['"clip"', '"wrap"', '"fast"'], "out_dtype": ['"float32"', "None"],
    "begin": ["[0]", "[1]"], "end": ["[2]", "[-1]"], "ceil_mode": ["True", "False"], "layout": ['"NCHW"', '"NHWC"'],
}


def _attr_values(rng: random.Random) -> str:
    choice = rng.randrange(8)
    if choice == 0:
        return str(rng.choice([0, 1, 2, -1, -3, 3, 100000000, 2**40, 10**30]))
    if choice == 1:
        return "[" + ", ".join(str(rng.choice([0, 1, 2, -1, 100000000])) for _ in range(rng.randrange(5))) + "]"
    if choice == 2:
        return rng.choice(['"float32"', '"int64"', '"bfloat16"', '"NCHW"', '"mean"', '"clip"', '"nope"', '""'])
    if choice == 3:
        return rng.choice(["True", "False", "None", "1.5", "-0.0", 'float("nan")'] + TVM_SCALARS)
    if choice == 4:
        return "(" + ", ".join(str(rng.randrange(-2, 4)) for _ in range(rng.randrange(1, 4))) + ",)"
    if choice == 5:
        return "[" * rng.randrange(1, 40) + "1" + "]" * rng.randrange(1, 40)
    if choice == 6:
        return "{" + '"k": ' + rng.choice(["1", "[1]", "{}"]) + "}"
    return rng.choice(SPECIAL_LITERALS)


class Mutator:
    """Token- and text-level mutations of corpus scripts."""

    def __init__(self, corpus: list[str], seed: int):
        self.corpus = corpus
        self.rng = random.Random(seed)
        self._corpus_set = set(corpus)
        self._token_cache: dict[str, list[re.Match]] = {}
        self.ops = _ops()
        self.kinds = [
            self.delete_token, self.duplicate_token, self.swap_tokens, self.random_bytes, self.deep_nesting,
            self.long_identifier, self.lookalike, self.line_break, self.special_literal, self.op_call,
            self.payload, self.splice, self.deep_if, self.zero_dim, self.window_op, self.tvm_scalar,
            self.return_annotation, self.bom,
        ]

    def mutate(self) -> tuple[str, str]:
        rng = self.rng
        text = rng.choice(self.corpus)
        names = []
        for _ in range(rng.choice([1, 1, 1, 2, 3])):
            kind = rng.choice(self.kinds)
            names.append(kind.__name__)
            text = kind(text)
        return text, "+".join(names)

    def _tokens(self, text: str) -> list[re.Match]:
        # Most mutations start from a corpus script: tokenizing it once is a sixth of the fuzzer's time.
        toks = self._token_cache.get(text)
        if toks is None:
            toks = list(_TOKEN.finditer(text))
            if text in self._corpus_set:
                self._token_cache[text] = toks
        return toks

    def _pick(self, text: str):
        toks = self._tokens(text)
        return self.rng.choice(toks) if toks else None

    def delete_token(self, text):
        t = self._pick(text)
        return text if t is None else text[: t.start()] + text[t.end() :]

    def duplicate_token(self, text):
        t = self._pick(text)
        return text if t is None else text[: t.end()] + t.group() * self.rng.randrange(1, 4) + text[t.end() :]

    def swap_tokens(self, text):
        toks = self._tokens(text)
        if len(toks) < 2:
            return text
        i = self.rng.randrange(len(toks) - 1)
        a, b = toks[i], toks[i + 1] if self.rng.random() < 0.7 else self.rng.choice(toks)
        if b.start() < a.start():
            a, b = b, a
        if a.end() > b.start():
            return text
        return text[: a.start()] + b.group() + text[a.end() : b.start()] + a.group() + text[b.end() :]

    def random_bytes(self, text):
        rng = self.rng
        i = rng.randrange(len(text) + 1)
        junk = "".join(rng.choice(BYTES) for _ in range(rng.randrange(1, 6)))
        cut = rng.randrange(0, 3)
        return text[:i] + junk + text[i + cut :]

    def deep_nesting(self, text):
        t = self._pick(text)
        if t is None:
            return text
        depth = self.rng.choice([50, 99, 100, 101, 150, 199, 200, 201, 300, 1000])
        opener, closer = self.rng.choice([("(", ")"), ("[", "]"), ("R.exp(", ")"), ("R.add(x, ", ")"), ("-", ""),
                                          ("R.tuple(", ")"), ("(", ",)"), ("{1: ", "}")])
        return text[: t.start()] + opener * depth + t.group() + closer * depth + text[t.end() :]

    def deep_if(self, text):
        """An If nest inserted before a return, on a bool constant or a parameter (often not a bool
        scalar): past the lexer's 2000 indentation levels it must be a located error, below it
        accepted (and printed, parsed back, run) or located, never a recursion failure."""
        rng = self.rng
        returns = list(re.finditer(r"^([ \t]*)return \S", text, re.M))
        params = re.findall(r"[(,]\s*(\w+): R\.Tensor", text)
        if not returns or not params:
            return text
        m, p = rng.choice(returns), rng.choice(params)
        # One space a level keeps a 2001-deep nest to ~6 MB (four would make it 24 MB).
        ind, depth = m.group(1), 2001 if rng.random() < 0.08 else rng.choice([20, 99, 100, 101, 300])
        cond = "zz_c" if rng.random() < 0.7 else p
        lines = [f"{ind}zz_c = R.const(True, \"bool\")"] + [f"{ind}{' ' * k}if {cond}:" for k in range(depth)]
        lines.append(f"{ind}{' ' * depth}zz{depth - 1} = {p}")
        for k in range(depth - 1, -1, -1):
            lines += [f"{ind}{' ' * k}else:", f"{ind}{' ' * (k + 1)}zz{k} = {p}"]
            if k:
                lines.append(f"{ind}{' ' * k}zz{k - 1} = zz{k}")
        return text[: m.start()] + "\n".join(lines) + "\n" + text[m.start() :]

    def long_identifier(self, text):
        toks = [t for t in self._tokens(text) if t.group()[0].isalpha() or t.group()[0] == "_"]
        if not toks:
            return text
        t = self.rng.choice(toks)
        name = self.rng.choice(["a", "x", "R.a", "_"]) * self.rng.choice([100, 1000, 10000])
        if self.rng.random() < 0.5:  # rename every occurrence: stays valid
            return re.sub(rf"\b{re.escape(t.group())}\b", name, text)
        return text[: t.start()] + name + text[t.end() :]

    def lookalike(self, text):
        positions = [i for i, c in enumerate(text) if c in LOOKALIKES]
        if not positions:
            return text
        i = self.rng.choice(positions)
        return text[:i] + self.rng.choice(LOOKALIKES[text[i]]) + text[i + 1 :]

    def line_break(self, text):
        rng = self.rng
        brk = rng.choice(LINE_BREAKS)
        if rng.random() < 0.3:
            return text.replace("\n", brk) if brk not in ("\\\n",) else text
        i = rng.randrange(len(text) + 1)
        if rng.random() < 0.5:  # inside a comment: must not shift later error lines
            return text[:i] + "  # c" + brk + "c\n" + text[i:]
        return text[:i] + brk + text[i:]

    def special_literal(self, text):
        toks = [t for t in self._tokens(text) if t.group()[0].isdigit() or t.group()[0] in "\"'"]
        if not toks:
            return text
        t = self.rng.choice(toks)
        return text[: t.start()] + self.rng.choice(SPECIAL_LITERALS) + text[t.end() :]

    def op_call(self, text):
        """A call of a random op on the function's parameters, with attributes from its schema (plausible
        or random values), inserted before a return."""
        rng = self.rng
        returns = [m for m in re.finditer(r"^([ \t]*)return \S", text, re.M)]
        params = re.findall(r"[(,]\s*(\w+): R\.Tensor", text)
        if not returns or not params:
            return text
        m = rng.choice(returns)
        op = rng.choice(self.ops)
        required = [a for a in op.args if not a.optional]
        count = len(required) if rng.random() < 0.8 else rng.randrange(0, len(op.args) + 2)
        args = [self._op_arg(op.args[i].kind if i < len(op.args) else None, params) for i in range(count)]
        attrs = []
        for a in op.attrs_schema:
            if rng.random() < 0.5:
                plausible = PLAUSIBLE.get(a.name)
                value = rng.choice(plausible) if plausible and rng.random() < 0.7 else _attr_values(rng)
                attrs.append(f"{a.name}={value}")
        if rng.random() < 0.05:
            attrs.append(f"nope={_attr_values(rng)}")
        line = f"{m.group(1)}zz_fuzz = {op.script_name}({', '.join(args + attrs)})\n"
        return text[: m.start()] + line + text[m.start() :]

    def _op_arg(self, kind, params):
        rng = self.rng
        if kind == "shape":
            return f"R.shape({rng.choice(EMPTY_SHAPES)})" if rng.random() < 0.3 else "R.shape([2, 3])"
        if kind == "prim" and rng.random() < 0.5:
            return rng.choice(TVM_SCALARS + ["0", "1.5", "-1"])
        return rng.choice(params)

    def zero_dim(self, text):
        """An empty dim in a parameter's annotation (or a creation op of an empty shape): every pass
        must keep the module printable as itself (an empty constant has no nested-list spelling)."""
        rng = self.rng
        dims = [m for m in re.finditer(r"R\.Tensor\(\(([^()]*)\)", text)]
        if dims and rng.random() < 0.7:
            m = rng.choice(dims)
            parts = [p for p in m.group(1).split(",") if p.strip()]
            if parts:
                k = rng.randrange(len(parts))
                parts[k] = " 0" if k else "0"
                if rng.random() < 0.3:
                    parts = ["0" if i == 0 else " 0" for i in range(len(parts))]
                body = ",".join(parts) + ("," if len(parts) == 1 else "")
                return text[: m.start(1)] + body + text[m.end(1) :]
        returns = list(re.finditer(r"^([ \t]*)return \S", text, re.M))
        if not returns:
            return text
        m = rng.choice(returns)
        op = rng.choice(["R.zeros", "R.ones", "R.full"])
        shape = rng.choice(EMPTY_SHAPES)
        dtype = rng.choice(["float32", "float16", "int64", "bool", "float64", "int8"])
        call = f'R.full({shape}, R.const(1, "{dtype}"), dtype="{dtype}")' if op == "R.full" else f'{op}({shape}, dtype="{dtype}")'
        return text[: m.start()] + f"{m.group(1)}zz_empty = {call}\n" + text[m.start() :]

    def window_op(self, text):
        """A pooling or convolution with window, stride, padding and dilation magnitudes far beyond its
        small input: work must stay bounded by the input and output sizes (the run and the gradient's).
        Drawn again while the output would be large (padding 10**5 on two axes makes 10**10 elements,
        which are legitimately slow to compute): what is checked is work beyond the output's size."""
        for _ in range(20):
            candidate = self._window_op()
            if _output_elements(candidate) <= MAX_WINDOW_OUTPUT:
                break
        return candidate

    def _window_op(self):
        rng = self.rng
        nd = rng.choice([1, 2, 3])
        sp = {1: "W", 2: "HW", 3: "DHW"}[nd]
        x_shape = (1, 2) + tuple(rng.choice([1, 3, 4]) for _ in range(nd))
        w_shape = (2, 2) + tuple(rng.choice([1, 2, 3]) for _ in range(nd))

        def vec(n, low=0):
            return "[" + ", ".join(str(max(low, rng.choice(MAGNITUDES))) for _ in range(n)) + "]"

        kind = rng.choice(["max_pool", "avg_pool", "conv", "conv_transpose", "adaptive_avg_pool"])
        attrs = []
        if kind in ("max_pool", "avg_pool"):
            call = f"R.nn.{kind}{nd}d(x, {vec(nd, 1)}"
            attrs += [f"ceil_mode={rng.choice(['True', 'False'])}"]
            if kind == "avg_pool":
                attrs.append(f"count_include_pad={rng.choice(['True', 'False'])}")
        elif kind == "adaptive_avg_pool":
            call = f"R.nn.adaptive_avg_pool{nd}d(x, {vec(nd, 1)}"
        else:
            call = f"R.nn.{kind.replace('conv', f'conv{nd}d')}(x, w"
            if kind == "conv_transpose" and rng.random() < 0.3:
                attrs.append(f"output_padding={vec(nd)}")
        if kind != "adaptive_avg_pool":
            for name, n, low in (("strides", nd, 1), ("padding", 2 * nd, 0), ("dilation", nd, 1)):
                if rng.random() < 0.7:
                    attrs.append(f"{name}={vec(n, low)}")
        call += "".join(", " + a for a in attrs) + ")"
        del sp
        return (f'@R.function\ndef main(x: R.Tensor({x_shape}, "float32"), w: R.Tensor({w_shape}, "float32")):\n'
                f"    y = {call}\n    z = R.sum(y)\n    return z\n")

    def tvm_scalar(self, text):
        """A scalar spelled as TVM prints it, where a prim value goes (clip's bounds) or in an attribute."""
        rng = self.rng
        returns = list(re.finditer(r"^([ \t]*)return \S", text, re.M))
        params = re.findall(r"[(,]\s*(\w+): R\.Tensor", text)
        if not returns or not params:
            return text
        m = rng.choice(returns)
        lo, hi = rng.choice(TVM_SCALARS + ["0"]), rng.choice(TVM_SCALARS)
        line = f"{m.group(1)}zz_tvm = R.clip({rng.choice(params)}, {lo}, {hi})\n"
        return text[: m.start()] + line + text[m.start() :]

    def return_annotation(self, text):
        """A return annotation with symbolic dims (defined by the parameters, or only there), string dims
        or static ones that may not match: the parser and well_formed must agree, and a mismatch is a
        located error."""
        rng = self.rng
        sigs = list(re.finditer(r"^([ \t]*def \w+\((?:[^()]|\((?:[^()]|\([^()]*\))*\))*\))(\s*->\s*[^:\n]+)?:", text, re.M))
        if not sigs:
            return text
        m = rng.choice(sigs)
        names = [n for n in re.findall(r'"([A-Za-z_]\w*)"', m.group(1)) if not re.match(r"b?float|u?int|bool", n)] + ["n", "m"]
        dims = [rng.choice([str(rng.randrange(0, 4)), rng.choice(names), f'"{rng.choice(names)}"', f'"{rng.choice(names)} + 1"'])
                for _ in range(rng.randrange(0, 3))]
        shape = "(" + ", ".join(dims) + ("," if len(dims) == 1 else "") + ")"
        ann = f' -> R.Tensor({shape}, dtype="float32")' if rng.random() < 0.9 else " -> R.Tensor(ndim=-1)"
        head = m.group(1)
        if rng.random() < 0.3:  # a parameter's dim made symbolic too
            head = re.sub(r"R\.Tensor\(\((\d+)", lambda _: f"R.Tensor(({rng.choice(['n', chr(34) + 'n' + chr(34)])}", head, count=1)
        return text[: m.start()] + head + ann + ":" + text[m.end() :]

    def bom(self, text):
        """A byte-order mark before the text: error locations must be those of the text without it."""
        return "\ufeff" + text

    def payload(self, text):
        """Code where text can go: strings, attributes, dims, comments, metadata, decorators, names."""
        rng = self.rng
        p = rng.choice(PAYLOADS)
        toks = self._tokens(text)
        if not toks:
            return text
        t = rng.choice(toks)
        form = rng.choice([p, repr(p), f"# {p}", f'"{p}"', f"R.Tensor(({p!r},))", f"{{{p!r}: 1}}", f"@{p}\n"])
        return text[: t.start()] + form + text[t.end() :]

    def splice(self, text):
        other = self.rng.choice(self.corpus)
        i, j = self.rng.randrange(len(text) + 1), self.rng.randrange(len(other) + 1)
        return text[:i] + other[j:]


# -- checking one input ---------------------------------------------------------------------------

OUTCOMES = ("accepted", "located", "other", "hang", "mismatch", "disagree", "unlocated")


def check(text: str) -> tuple[str, str]:
    """(outcome, detail) for one input."""
    import retrograd
    from retrograd.errors import DiagnosticError
    from retrograd.ir import well_formed

    try:
        mod = retrograd.parse(text, source_name="fuzz.py")
    except DiagnosticError as err:
        span = err.span
        if span is None or span.source_name != "fuzz.py" or span.line < 1 or span.col < 1:
            return "unlocated", str(err)[:300]
        try:
            rendered = str(err)
        except Exception as e:  # noqa: BLE001 - the renderer itself failed
            return "other", f"rendering: {type(e).__name__}: {e}"
        if len(rendered) > 20000:
            return "other", "an error message of over 20,000 characters"
        problem = _location_problem(text, err, rendered)
        if problem:
            return "unlocated", problem
        return "located", ""
    except Exception as e:  # noqa: BLE001 - the finding
        return "other", f"parse: {type(e).__name__}: {e}\n{traceback.format_exc(limit=-4)}"
    try:
        problems = well_formed(mod)
    except Exception as e:  # noqa: BLE001
        return "other", f"well_formed: {type(e).__name__}: {e}"
    if problems:
        return "disagree", "; ".join(problems)[:500]
    try:
        printed = mod.script()
        again = retrograd.parse(printed, source_name="printed.py")
        same = retrograd.structural_equal(mod, again)
    except Exception as e:  # noqa: BLE001
        return "mismatch", f"{type(e).__name__}: {str(e)[:500]}"
    if not same:
        return "mismatch", "structural_equal(parse(text), parse(print(parse(text)))) is False"
    return after_parse(mod, text)


_BINDING_TARGET = re.compile(r"[ \t]*([A-Za-z_]\w*)[ \t]*(?::.*)?$", re.S)


def _binding_name(line: str, depth: int = 0) -> str | None:
    """The name a binding statement `name = ...` / `name: ann = ...` defines (its `=` outside brackets,
    not part of `==`), or None for any other line (a parameter's `dtype=` is inside brackets; `depth` is
    the bracket depth the line starts at, above 0 on a continuation line of a signature)."""
    if depth > 0:
        return None
    quote = None
    for i, ch in enumerate(line):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "=" and depth == 0 and line[i + 1 : i + 2] != "=" and (i == 0 or line[i - 1] not in "=!<>"):
            m = _BINDING_TARGET.match(line[:i])
            return m.group(1) if m else None
        elif ch == "#":
            return None
    return None


def _depth_at_line(text: str, line: int) -> int:
    """The bracket depth at the start of `line` (1-based, lines as the lexer counts them), outside
    strings and comments."""
    depth = 0
    for src in text.split("\n")[: line - 1]:
        quote = None
        for ch in src:
            if quote:
                quote = None if ch == quote else quote
            elif ch in "\"'":
                quote = ch
            elif ch == "#":
                break
            elif ch in "([{":
                depth += 1
            elif ch in ")]}":
                depth = max(depth - 1, 0)
    return depth


def _location_problem(text: str, err, rendered: str) -> str:
    """Why a located error is not located well enough, or "": a byte-order mark shifts nothing, and an
    error inside a binding's value names the binding."""
    import retrograd
    from retrograd.errors import DiagnosticError, OpError, TypeInferenceError

    span = err.span
    if text.startswith("\ufeff") and not text.startswith("\ufeff\ufeff"):  # a second one is a character
        try:
            retrograd.parse(text[1:], source_name="fuzz.py")
        except DiagnosticError as plain:
            if plain.span is not None and (plain.span.line, plain.span.col) != (span.line, span.col):
                return (f"a byte-order mark moved the error from {plain.span.line}:{plain.span.col} "
                        f"to {span.line}:{span.col}")
    if isinstance(err, OpError | TypeInferenceError):
        line = span.source_line() or ""  # the line as the lexer counts them (only "\n" breaks a line)
        name = _binding_name(line, _depth_at_line(text, span.line))
        # The rendering shortens a long name in the middle; the note holds it whole.
        named = f"'{name}'" in rendered or any(f"'{name}'" in note for note in err.notes)
        if name and name != "metadata" and not named:
            return f"the error on the binding of '{name}' does not name it: {rendered[:300]}"
    return ""


PIPELINE = "fold-constant, cse, simplify, dce"
EVERY_PASS_SHARE = 8
MAX_RUN_ELEMENTS = 1 << 16


def after_parse(mod, text: str = "") -> tuple[str, str]:
    """An accepted module through every pass (each output verifies, prints and parses back as the same
    module) and, when its parameters are small static tensors, run on random inputs, with its adjoint."""
    import numpy as np

    import retrograd
    from retrograd.errors import DiagnosticError
    from retrograd.ir import well_formed
    from retrograd.passes import parse_pipeline

    adjoints = []
    for pipeline in _pipelines(mod, text):
        try:
            out = parse_pipeline(pipeline)(mod)
        except DiagnosticError:
            continue
        except Exception as e:  # noqa: BLE001
            return "other", f"{pipeline}: {type(e).__name__}: {e}\n{traceback.format_exc(limit=-4)}"
        problems = well_formed(out)
        if problems:
            return "other", f"{pipeline} produced an ill-formed module: {problems[:2]}"
        try:
            again = retrograd.parse(out.script(), source_name="passes.py")
        except Exception as e:  # noqa: BLE001
            return "mismatch", f"the output of {pipeline} does not parse back: {type(e).__name__}: {str(e)[:300]}"
        if not retrograd.structural_equal(out, again):
            return "mismatch", f"the output of {pipeline} prints as a different module"
        if pipeline.startswith("gradient"):
            adjoints.append(out)
    rng = np.random.default_rng(0)
    for m in [mod] + adjoints:  # the adjoints run the backward kernels
        outcome = _run(m, rng)
        if outcome is not None:
            return outcome
    return "accepted", ""


def _pipelines(mod, text: str) -> list[str]:
    """The optimizing passes and the gradient of the first function with parameters; for one input in
    EVERY_PASS_SHARE (by a hash of its text, so a replay does the same) also fold-constant(grow=True)
    and the checkpoint of that adjoint, the costliest passes to run."""
    from retrograd.ir.expr import Function

    every = zlib.crc32(text.encode("utf-8", "surrogatepass")) % EVERY_PASS_SHARE == 0
    pipelines = [PIPELINE] + (["fold-constant(grow=True)"] if every else [])
    funcs = [name for name, f in mod.items() if isinstance(f, Function) and f.params]
    if funcs:
        name = funcs[0]
        pipelines.append(f"gradient(func={name})")
        if every:
            pipelines.append(f"gradient(func={name}), checkpoint(func={name}_adjoint, budget=50%)")
    return pipelines


def _run(mod, rng):
    """("other", detail) when a function of `mod` whose parameters are small static tensors fails
    unlocated on random inputs, else None."""
    import numpy as np

    import retrograd
    from retrograd.errors import DiagnosticError
    from retrograd.ir.struct_info import TensorStructInfo

    for name, func in mod.items():
        params = [p.struct_info for p in getattr(func, "params", ())]
        if not all(isinstance(s, TensorStructInfo) and s.shape is not None and s.dtype
                   and all(isinstance(d, int) and d <= MAX_RUN_ELEMENTS for d in s.shape)
                   and math.prod(max(d, 1) for d in s.shape) <= MAX_RUN_ELEMENTS
                   for s in params):
            continue
        inputs = [(rng.integers(0, 2, s.shape) if s.dtype[0] in "iub" else rng.standard_normal(s.shape)).astype(s.dtype)
                  for s in params]
        try:
            retrograd.build(mod)[name](*inputs)
        except DiagnosticError:
            pass
        except Exception as e:  # noqa: BLE001
            return "other", f"run {name}: {type(e).__name__}: {e}\n{traceback.format_exc(limit=-4)}"
    return None


class Hang(Exception):
    pass


def _alarm(signum, frame):
    raise Hang()


def check_in_process(text: str, timeout: float) -> tuple[str, str]:
    """check() under a CPU-time timer (Unix, main thread): a hang in Python code is reported, not waited
    out. CPU time, not wall-clock time, so that a loaded machine does not turn slow inputs into hangs."""
    old = signal.signal(signal.SIGPROF, _alarm)
    signal.setitimer(signal.ITIMER_PROF, timeout)
    try:
        return check(text)
    except Hang:
        return "hang", f"over {timeout} s of CPU time"
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, old)



def _worker(conn, timeout):
    while True:
        text = conn.recv()
        if text is None:
            return
        conn.send(check_in_process(text, timeout))


WARM_UP = '@R.function\ndef main(x: R.Tensor((2,), "float32")):\n    y = R.nn.relu(x)\n    return y\n'
# A worker stuck in native code (where no signal is handled) is killed after this much wall-clock time.
WALL_CLOCK_FACTOR, WALL_CLOCK_MIN = 10, 60.0


class WorkerPool:
    """One worker process. The worker times each input's CPU time itself; the parent kills a worker that
    does not answer within a generous wall-clock limit (stuck in native code) and replaces it."""

    def __init__(self, timeout: float):
        self.timeout = timeout
        self.wall_limit = max(WALL_CLOCK_FACTOR * timeout, WALL_CLOCK_MIN)
        self.ctx = mp.get_context("fork" if hasattr(os, "fork") else "spawn")
        self._start()

    def _start(self):
        self.conn, child = self.ctx.Pipe()
        self.proc = self.ctx.Process(target=_worker, args=(child, self.timeout), daemon=True)
        self.proc.start()
        # A fresh worker builds the grammar and imports the kernels first: not the next input's time.
        self.conn.send(WARM_UP)
        self.conn.recv()

    def check(self, text: str) -> tuple[str, str]:
        self.conn.send(text)
        if self.conn.poll(self.wall_limit):
            try:
                return self.conn.recv()
            except EOFError:
                self.proc.join()
                self._start()
                return "other", f"the worker died (exit code {self.proc.exitcode})"
        self.proc.kill()
        self.proc.join()
        self._start()
        return "hang", f"no answer in {self.wall_limit} s of wall-clock time"

    def close(self):
        self.conn.send(None)
        self.proc.join(5)


# The run stage checks behaviour, not capacity: results over 256 MiB are refused (a located error).
LIMIT_VAR, FUZZ_LIMIT = "RETROGRAD_MAX_ALLOCATION_BYTES", str(1 << 28)


def run(inputs: int, seed: int, timeout: float = 5.0, in_process: bool = False, save_dir: Path | None = None,
        progress: bool = False) -> dict:
    """Fuzz `inputs` mutated scripts; returns the counts per outcome and the first findings."""
    # Kernels on random data overflow and divide by zero: NumPy's warnings about that are noise here.
    warnings.simplefilter("ignore", RuntimeWarning)
    SENTINEL.unlink(missing_ok=True)
    mutator = Mutator(load_corpus(), seed)
    counts = {k: 0 for k in OUTCOMES}
    findings: list[tuple[str, str, str, str]] = []
    saved_limit = os.environ.get(LIMIT_VAR)
    os.environ[LIMIT_VAR] = FUZZ_LIMIT
    pool = None if in_process else WorkerPool(timeout)
    start = time.time()
    try:
        for i in range(inputs):
            text, how = mutator.mutate()
            outcome, detail = check_in_process(text, timeout) if in_process else pool.check(text)
            counts[outcome] += 1
            if outcome not in ("accepted", "located"):
                findings.append((outcome, how, detail, text))
                if save_dir is not None:
                    save_dir.mkdir(parents=True, exist_ok=True)
                    (save_dir / f"{outcome}-{seed}-{i}.py").write_text(text, encoding="utf-8", errors="surrogatepass")
            if progress and (i + 1) % 500 == 0:
                print(f"{i + 1} inputs, {time.time() - start:.0f} s: {counts}", file=sys.stderr, flush=True)
    finally:
        if pool is not None:
            pool.close()
        if saved_limit is None:
            os.environ.pop(LIMIT_VAR, None)
        else:
            os.environ[LIMIT_VAR] = saved_limit
    counts["inputs"] = inputs
    counts["seconds"] = round(time.time() - start, 1)
    counts["payload_executed"] = SENTINEL.exists()
    return {"counts": counts, "findings": findings}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--inputs", type=int, default=10000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=5.0, help="CPU seconds per input before it counts as a hang")
    ap.add_argument("--in-process", action="store_true", help="no worker process (SIGALRM timeout)")
    ap.add_argument("--save-dir", type=Path, help="write failing inputs here")
    ap.add_argument("--replay", type=Path, help="check one saved input and print the outcome")
    args = ap.parse_args(argv)
    if args.replay:
        os.environ[LIMIT_VAR] = FUZZ_LIMIT
        outcome, detail = check(args.replay.read_text(encoding="utf-8", errors="surrogatepass"))
        print(outcome, detail)
        return 0 if outcome in ("accepted", "located") else 1
    result = run(args.inputs, args.seed, args.timeout, args.in_process, args.save_dir, progress=True)
    counts = result["counts"]
    for outcome, how, detail, _ in result["findings"][:20]:
        print(f"[{outcome}] via {how}: {detail.strip()[:400]}")
    print(" ".join(f"{k}={v}" for k, v in counts.items()))
    bad = sum(counts[k] for k in ("other", "hang", "mismatch", "disagree", "unlocated")) + counts["payload_executed"]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
