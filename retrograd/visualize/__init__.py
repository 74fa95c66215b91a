"""Pictures of a module: `dot.py` its functions as Graphviz graphs (`retrograd dot`), `memory_plot.py` the
memory timeline of a call (`retrograd memory`; matplotlib or plotly, imported when called)."""

from retrograd.visualize.dot import render, to_dot

__all__ = ["render", "to_dot"]
