"""ComposedVjp: the gradient rule of a fused backward op, as the vjp of its forward op written with other ops."""

# A fused backward op B(cotangent, primals...) computes the vector-Jacobian product of some forward
# computation F. Its own gradient (second order) needs F's second derivatives; rather than deriving
# them by hand per op, B's rule returns F written with other, simpler ops. The Gradient pass then
# emits F, sweeps it backwards once to get B's value in composed form, and sweeps those bindings
# backwards with B's adjoint (see passes/gradient/sweep.py). F must not use the op B belongs to
# (that sweep would produce B again, without end); the fused kernel stays the first-order path.

from __future__ import annotations

from typing import Callable

import attrs

from retrograd.ir.expr import Expr


@attrs.frozen
class ComposedVjp:
    """What a fused backward op's gradient rule returns instead of one partial per argument.

    - `cotangent`: the op's cotangent argument (a Tuple of them when F has a tuple result);
    - `primals`: the expressions the op differentiates F with respect to, one per field of its result
      (call arguments, or values built from them such as R.zeros_like(gamma) for a parameter the
      op's arguments leave out);
    - `forward`: forward(*primals) -> F's value as (unnormalized) calls of other ops;
    - `single`: the op's result is the one gradient rather than a tuple of them.
    """

    cotangent: Expr
    primals: tuple = attrs.field(converter=tuple)
    forward: Callable[..., Expr]
    single: bool = False
