"""Lowering for inspection: IR modules as readable Python source and as Graphviz graphs."""

from retrograd.lower.dot import render, to_dot
from retrograd.lower.python import lower_to_python

__all__ = ["lower_to_python", "render", "to_dot"]
