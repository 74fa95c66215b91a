"""Before scripts of the checkpoint-marker tests (TVM 0.27's own checkpoint tests and a few beyond them), and
the marked chain that tests and benchmarks/bench_markers.py measure."""

from __future__ import annotations

import re

H = "@I.ir_module\nclass Module:\n"

SEQUENTIAL = H + """    @R.function
    def main(x: R.Tensor((3, 3), "float32")):
        with R.dataflow():
            x_scp = R.grad.start_checkpoint(x)
            lv1 = R.power(x_scp, R.const(3, "float32"))
            lv1_ecp = R.grad.end_checkpoint(lv1)
            lv2 = R.power(lv1_ecp, R.const(3, "float32"))
            lv2_scp = R.grad.start_checkpoint(lv2)
            lv3 = R.power(lv2_scp, R.const(3, "float32"))
            lv4 = R.power(lv3, R.const(3, "float32"))
            gv = R.sum(lv4)
            gv_ecp = R.grad.end_checkpoint(gv)
            R.output(gv_ecp)
        return gv_ecp
"""

CONSECUTIVE = H + """    @R.function
    def main(x: R.Tensor((3, 3), "float32")):
        with R.dataflow():
            x_scp = R.grad.start_checkpoint(x)
            lv1 = R.power(x_scp, R.const(3, "float32"))
            lv2 = R.power(lv1, R.const(3, "float32"))
            lv2_ecp = R.grad.end_checkpoint(lv2)
            lv2_scp = R.grad.start_checkpoint(lv2_ecp)
            lv3 = R.power(lv2_scp, R.const(3, "float32"))
            lv4 = R.power(lv3, R.const(3, "float32"))
            lv4_ecp = R.grad.end_checkpoint(lv4)
            gv = R.sum(lv4_ecp)
            R.output(gv)
        return gv
"""

TUPLE = H + """    @R.function
    def main(x: R.Tensor((3, 3), "float32")):
        with R.dataflow():
            x_scp = R.grad.start_checkpoint(x)
            lv1 = R.power(x_scp, R.const(3, "float32"))
            lv2 = (x, lv1)
            lv3 = lv2
            lv4 = R.power(lv3[0], R.const(3, "float32"))
            lv4_ecp = R.grad.end_checkpoint(lv4)
            gv = R.sum(lv4_ecp)
            R.output(gv)
        return gv
"""

TREE = H + """    @R.function
    def main(x: R.Tensor((3, 3), "float32"), y: R.Tensor((3, 3), "float32"), z: R.Tensor((3, 3), "float32"), u: R.Tensor((3, 3), "float32"), v: R.Tensor((3, 3), "float32")):
        with R.dataflow():
            lv1 = x * y
            lv1_scp = R.grad.start_checkpoint(lv1)
            z_scp = R.grad.start_checkpoint(z)
            lv2 = lv1_scp * z_scp
            lv2_ecp = R.grad.end_checkpoint(lv2)
            u_scp = R.grad.start_checkpoint(u)
            v_scp = R.grad.start_checkpoint(v)
            lv3 = u_scp * v_scp
            lv3_ecp = R.grad.end_checkpoint(lv3)
            lv4 = lv2_ecp * lv3_ecp
            gv = R.sum(lv4)
            R.output(gv)
        return gv
"""

DAG = H + """    @R.function
    def main(x: R.Tensor((3, 3), "float32")):
        with R.dataflow():
            lv = R.grad.start_checkpoint(x)
            lv1 = R.multiply(lv, R.const(2, "float32"))
            lv2 = R.multiply(lv1, R.const(2, "float32"))
            lv3 = R.grad.end_checkpoint(lv2)
            lv4 = R.multiply(x, lv3)
            lv5 = R.grad.start_checkpoint(lv4)
            lv6 = R.multiply(lv5, R.const(2, "float32"))
            lv7 = R.multiply(lv6, R.const(2, "float32"))
            lv8 = R.grad.end_checkpoint(lv7)
            lv9 = R.multiply(lv4, lv8)
            lv10 = R.grad.start_checkpoint(lv9)
            lv11 = R.multiply(lv10, R.const(2, "float32"))
            lv12 = R.multiply(lv11, R.const(2, "float32"))
            lv13 = R.grad.end_checkpoint(lv12)
            lv14 = R.multiply(lv9, lv13)
            gv: R.Tensor((), "float32") = R.sum(lv14, axis=None, keepdims=False)
            R.output(gv)
        return gv
"""

SEQ_API = H + """    @R.function
    def main(x: R.Tensor((3, 3), "float32")) -> R.Tensor((3, 3), "float32"):
        with R.dataflow():
            x_scp: R.Tensor((3, 3), "float32") = R.grad.start_checkpoint(x)
            lv: R.Tensor((3, 3), "float32") = R.add(x_scp, x_scp)
            lv1: R.Tensor((3, 3), "float32") = R.add(lv, lv)
            lv1_ecp: R.Tensor((3, 3), "float32") = R.grad.end_checkpoint(lv1)
            lv1_ecp_scp: R.Tensor((3, 3), "float32") = R.grad.start_checkpoint(lv1_ecp)
            lv2: R.Tensor((3, 3), "float32") = R.add(lv1_ecp_scp, lv1_ecp_scp)
            lv3: R.Tensor((3, 3), "float32") = R.add(lv2, lv2)
            lv3_ecp: R.Tensor((3, 3), "float32") = R.grad.end_checkpoint(lv3)
            lv4: R.Tensor((3, 3), "float32") = R.add(lv3_ecp, lv3_ecp)
            lv4_scp: R.Tensor((3, 3), "float32") = R.grad.start_checkpoint(lv4)
            lv5: R.Tensor((3, 3), "float32") = R.add(lv4_scp, lv4_scp)
            lv6: R.Tensor((3, 3), "float32") = R.add(lv5, lv5)
            lv6_ecp: R.Tensor((3, 3), "float32") = R.grad.end_checkpoint(lv6)
            lv7: R.Tensor((3, 3), "float32") = R.add(lv6_ecp, lv6_ecp)
            lv8: R.Tensor((3, 3), "float32") = R.add(lv7, lv7)
            gv: R.Tensor((3, 3), "float32") = lv8
            R.output(gv)
        return gv
"""

INTERMEDIATE = H + """    @R.function
    def main(x: R.Tensor((3, 3), "float32")) -> R.Tensor((), "float32"):
        with R.dataflow():
            x_scp: R.Tensor((3, 3), "float32") = R.grad.start_checkpoint(x)
            lv: R.Tensor((3, 3), "float32") = R.multiply(x_scp, x_scp)
            lv1: R.Tensor((3, 3), "float32") = R.multiply(lv, x_scp)
            lv1_ecp: R.Tensor((3, 3), "float32") = R.grad.end_checkpoint(lv1)
            gv: R.Tensor((), "float32") = R.sum(lv1_ecp, axis=None, keepdims=False)
            R.output(gv)
        return gv
"""

IF_CALL = H + """    @R.function
    def square(a: R.Tensor((3,), "float32")) -> R.Tensor((3,), "float32"):
        b = R.multiply(a, a)
        return b

    @R.function
    def main(x: R.Tensor((3,), "float32"), y: R.Tensor((3,), "float32"), c: R.Tensor((), "bool")) -> R.Tensor((), "float32"):
        s = R.grad.start_checkpoint(x)
        a = R.sin(s)
        k = R.exp(y)
        if c:
            r = R.exp(a)
        else:
            r = R.multiply(a, k)
        q = Module.square(r)
        e = R.grad.end_checkpoint(q)
        t = R.tanh(e)
        out = R.sum(R.multiply(t, y))
        return out
"""

BLOCKS = H + """    @R.function
    def main(x: R.Tensor((3,), "float32"), y: R.Tensor((3,), "float32")) -> R.Tensor((), "float32"):
        with R.dataflow():
            s = R.grad.start_checkpoint(x)
            a = R.sin(s)
            b = R.multiply(a, y)
            e = R.grad.end_checkpoint(b)
            R.output(a, e)
        d = R.cos(e)
        with R.dataflow():
            d2 = R.grad.start_checkpoint(d)
            f = R.exp(d2)
            g = R.tanh(f)
            g_e = R.grad.end_checkpoint(g)
            out = R.sum(R.multiply(g_e, a))
            R.output(out)
        return out
"""
TWO_GROUPS = H + """    @R.function
    def main(x: R.Tensor((3,), "float32")) -> R.Tensor((), "float32"):
        with R.dataflow():
            s = R.grad.start_checkpoint(x)
            a = R.exp(s)
            b = R.sin(s)
            ea = R.grad.end_checkpoint(a)
            eb = R.grad.end_checkpoint(b)
            gv = R.sum(R.multiply(ea, eb))
            R.output(gv)
        return gv
"""
SPARSE = H + """    @R.function
    def main(x: R.Tensor((2, 4), "float32"), table: R.Tensor((5, 4), "float32"), idx: R.Tensor((2,), "int64")) -> R.Tuple(R.Tensor((), "float32"), R.Tensor((2, 4), "float32")):
        with R.dataflow():
            s = R.grad.start_checkpoint(x)
            h = R.tanh(s)
            rows = R.take(table, idx, axis=0)
            i2 = R.grad.start_checkpoint(idx)
            rows2 = R.take(table, i2, axis=0)
            p = R.multiply(h, rows)
            q = R.sigmoid(p)
            e = R.grad.end_checkpoint(q)
            f = R.multiply(e, rows2)
            gv = R.sum(f)
            R.output(gv, e)
        return (gv, e)
"""


def unmarked(text: str) -> str:
    """The same module with every checkpoint marker replaced by its argument (a plain alias)."""
    return re.sub(r"R\.grad\.(start|end)_checkpoint\((\w+)\)", r"\2", text)


def chain(layers: int, every: int, width: int = 64, batch: int = 256, matmul: bool = False) -> str:
    """x -> tanh(x [@ w_i]) -> ... -> sum, with a start/end_checkpoint segment every `every` layers."""
    t = f'R.Tensor(({batch}, {width}), "float32")'
    ws = "".join(f', w{i}: R.Tensor(({width}, {width}), "float32")' for i in range(layers if matmul else 0))
    body, h = [], "x"
    for i in range(layers):
        if every and i % every == 0:
            body.append(f"s{i} = R.grad.start_checkpoint({h})")
            h = f"s{i}"
        if matmul:
            body.append(f"m{i} = R.matmul({h}, w{i})")
            h = f"m{i}"
        body.append(f"h{i} = R.tanh({h})")
        h = f"h{i}"
        if every and (i + 1) % every == 0:
            body.append(f"e{i} = R.grad.end_checkpoint({h})")
            h = f"e{i}"
    body += [f"gv = R.sum({h})", "R.output(gv)"]
    lines = "\n".join(" " * 12 + line for line in body)
    return H + f"    @R.function\n    def main(x: {t}{ws}) -> R.Tensor((), \"float32\"):\n        with R.dataflow():\n{lines}\n        return gv\n"
