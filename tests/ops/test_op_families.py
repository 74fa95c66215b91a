"""Ops are grouped by TVM's categories: every relax.nn.* op is defined under ops/nn/, every image.* op under
ops/image/, the index and manipulate families in their packages, and those packages define nothing else
(besides the grad.* backward ops of their own ops). The defining module of an op is the op module whose
top level was running when `register` was called, recorded by a profile hook in a fresh interpreter."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

RECORD = r"""
import json, sys
where = {}
def profile(frame, event, arg):
    if event == "call" and frame.f_code.co_name == "register" and frame.f_code.co_filename.endswith("registry.py"):
        caller = frame.f_back
        while caller is not None and caller.f_code.co_name != "<module>":
            caller = caller.f_back
        where[frame.f_locals["name"]] = caller.f_globals["__name__"]
sys.setprofile(profile)
import retrograd.ops
sys.setprofile(None)
print(json.dumps(where))
"""

# Op families and the package (or module) that holds them.
FAMILIES = {
    "retrograd.ops.nn": lambda name: name.startswith("relax.nn."),
    "retrograd.ops.image": lambda name: name.startswith("relax.image."),
    "retrograd.ops.ccl": lambda name: name.startswith("relax.ccl."),
    "retrograd.ops.index": lambda name: name in {
        "relax.take", "relax.strided_slice", "relax.dynamic_strided_slice", "relax.index_tensor", "relax.index_put",
        "relax.slice_scatter", "relax.gather_elements", "relax.gather_nd", "relax.scatter_elements", "relax.scatter_nd"},
    "retrograd.ops.manipulate": lambda name: name in {
        "relax.reshape", "relax.permute_dims", "relax.expand_dims", "relax.squeeze", "relax.flatten", "relax.concat",
        "relax.split", "relax.broadcast_to", "relax.collapse_sum_to", "relax.collapse_sum_like", "relax.stack",
        "relax.tile", "relax.repeat", "relax.flip", "relax.reverse_sequence", "relax.layout_transform"},
    "retrograd.ops.create": lambda name: name in {
        "relax.zeros", "relax.ones", "relax.full", "relax.zeros_like", "relax.ones_like", "relax.full_like",
        "relax.arange", "relax.eye", "relax.eye_like", "relax.hamming_window", "relax.meshgrid", "relax.one_hot",
        "relax.triu", "relax.tril"},
    "retrograd.ops.datatype": lambda name: name == "relax.astype",
}


def defining_modules() -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, "-c", RECORD], capture_output=True, text=True, env=env, cwd=ROOT, check=True)
    return json.loads(out.stdout)


def inside(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_every_op_is_defined_in_its_family_and_each_family_holds_only_its_own_ops():
    where = defining_modules()
    from retrograd.ops import all_ops

    assert set(where) == {op.name for op in all_ops()}
    misplaced = {name: module for name, module in where.items()
                 for package, member in FAMILIES.items() if member(name) and not inside(module, package)}
    assert misplaced == {}
    for package, member in FAMILIES.items():
        held = {name for name, module in where.items() if inside(module, package)}
        strays = {name for name in held if not member(name) and not name.startswith("relax.grad.")}
        assert strays == set(), package
        assert held, package  # the family exists and registers something


def test_the_recorder_names_the_module_whose_top_level_registers():
    where = defining_modules()
    assert where["relax.nn.conv2d"] == "retrograd.ops.nn.conv"
    assert where["relax.add"] == "retrograd.ops.binary"  # registered through a helper of ops/elementwise.py
    assert where["relax.erf"] == "retrograd.ops.unary"
