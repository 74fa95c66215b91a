"""OpCases of R.ccl.*: in one process the collectives are a group of one's (num_workers=1); their values
and gradients over several processes, and their inference for several workers against TVM's, are
checked in tests/distributed/."""

from __future__ import annotations

from ops.op_case import OpCase, T

OWN = "retrograd's own op: TVM has none"

CASES = [
    OpCase("relax.ccl.allreduce", [T(3, 4)], name="default"),
    OpCase("relax.ccl.allreduce", [T(3, 4, dtype="float64")], {"op_type": "avg"}, name="avg"),
    OpCase("relax.ccl.allreduce", [T(2, 3)], {"op_type": "prod", "in_group": False}, low=0.5, high=1.5, name="prod"),
    OpCase("relax.ccl.allreduce", [T(2, 3)], {"op_type": "max"}, name="max"),
    OpCase("relax.ccl.allreduce", [T(2, 3)], {"op_type": "min"}, name="min"),
    OpCase("relax.ccl.allreduce", [T(4, dtype="int64")], {"op_type": "sum"}, name="int"),
    OpCase("relax.ccl.allreduce", [T("n", 4)], {"op_type": "sum"}, name="symbolic"),
    OpCase("relax.ccl.allgather", [T("n", 4)], {"num_workers": 1, "in_group": False}, name="symbolic"),
    OpCase("relax.ccl.allgather", [T(3, 4)], {"num_workers": 1}, name="one"),
    OpCase("relax.ccl.broadcast_from_worker0", [T(3, 4)]),
    OpCase("relax.ccl.broadcast_from_worker0", [T()], name="scalar"),
    OpCase("relax.ccl.scatter_from_worker0", [T(4, 6)], {"num_workers": 1}, name="one"),
    OpCase("relax.ccl.scatter_from_worker0", [T(4, 6)], {"num_workers": 1, "axis": 1}, name="axis1"),
    OpCase("relax.ccl.reduce_to_worker0", [T(3, 4)], tvm=False, note=OWN),
    OpCase("relax.ccl.gather_to_worker0", [T(3, 4)], {"num_workers": 1, "axis": 1}, tvm=False, note=OWN),
    OpCase("relax.ccl.local_slice", [T(4, 6)], {"num_workers": 1}, tvm=False, note=OWN),
    OpCase("relax.ccl.local_embed", [T(4, 6)], {"num_workers": 1, "axis": 1}, tvm=False, note=OWN),
]
