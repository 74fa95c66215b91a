"""ExprMutator's per-binding hook: rewrite, drop with remap, emit before, finish_block; checked by running."""

import numpy as np

import retrograd
from retrograd.ir import ExprMutator, well_formed
from retrograd.ir.expr import Call
from retrograd.ops.api import R

TEXT = """
@R.function
def main(x: R.Tensor((4,), "float32")):
    with R.dataflow():
        a = R.exp(x)
        b = R.add(a, x)
        c = R.multiply(b, b)
        R.output(c)
    return c
"""


class _Rewrite(ExprMutator):
    """exp(v) -> exp(negative(v)) (the negative emitted before); add(u, v) dropped, its uses read u."""

    def __init__(self):
        super().__init__()
        self.block_sizes = []

    def rewrite_binding(self, binding):
        value = super().rewrite_binding(binding)
        name = value.op.name if isinstance(value, Call) else None
        if name == "relax.exp":
            neg = self.builder.emit(R.negative(value.args[0]), "neg")
            return R.exp(neg)
        if name == "relax.add":
            self.var_remap[binding.var] = value.args[0]
            return None
        return value

    def finish_block(self):
        self.block_sizes.append(len(self.builder.current_bindings()))
        return False


def test_rewrite_drop_emit_and_finish_block():
    mod = retrograd.parse(TEXT)
    m = _Rewrite()
    new = m.visit_expr(mod["main"])
    out = mod.with_function("main", new)
    assert well_formed(out) == []
    assert m.block_sizes == [3]  # neg, exp, multiply: the add is gone
    x = np.array([-1.0, 0.0, 0.5, 2.0], dtype="float32")
    want = np.exp(-x.astype(np.float64)) ** 2
    np.testing.assert_allclose(retrograd.build(out)["main"](x), want, rtol=1e-6)
    # The input is untouched and an unchanged walk returns the very same function.
    np.testing.assert_allclose(retrograd.build(mod)["main"](x), (np.exp(x.astype(np.float64)) + x) ** 2, rtol=1e-6)
    assert ExprMutator().visit_expr(mod["main"]) is mod["main"]
