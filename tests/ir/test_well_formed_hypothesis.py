"""Property: dropping a binding that is used later from a random module is always reported."""

from __future__ import annotations


from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st


from strategies import modules  # noqa: E402

from retrograd.ir import ExprVisitor, Function, IRModule, SeqExpr, Var, well_formed  # noqa: E402
from retrograd.ir.structural import structural_equal  # noqa: E402

SETTINGS = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


class _Uses(ExprVisitor):
    def __init__(self):
        super().__init__()
        self.vars: set = set()

    def visit_var(self, var: Var) -> None:
        self.vars.add(var)


def _used_later(seq: SeqExpr):
    """(block index, binding index) of bindings whose var a later binding or the result uses."""
    uses = _Uses()
    uses.visit_expr(seq.body)
    out = []
    for bi in range(len(seq.blocks) - 1, -1, -1):
        for ji in range(len(seq.blocks[bi].bindings) - 1, -1, -1):
            binding = seq.blocks[bi].bindings[ji]
            if binding.var in uses.vars:
                out.append((bi, ji))
            uses.visit_expr(binding.value)
    return out


@SETTINGS
@given(modules(), st.data())
def test_dropping_a_used_binding_is_reported(mod, data):
    name = data.draw(st.sampled_from(list(mod.keys())))
    func = mod[name]
    candidates = _used_later(func.body)
    assume(candidates)
    bi, ji = data.draw(st.sampled_from(candidates))
    block = func.body.blocks[bi]
    dropped = block.bindings[ji]
    new_block = type(block)(block.bindings[:ji] + block.bindings[ji + 1 :])
    blocks = list(func.body.blocks)
    blocks[bi] = new_block
    body = SeqExpr(blocks, func.body.body, func.body.struct_info)
    broken = IRModule({**mod.functions(), name: Function(func.params, body, func.ret_struct_info)})
    problems = well_formed(broken)
    assert any(f"undefined variable '{dropped.var.name_hint}'" in p and f"function '{name}'" in p
               for p in problems), problems
    assert not structural_equal(mod, broken)
    assert well_formed(mod) == []
