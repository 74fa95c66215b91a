"""to_dot / `retrograd dot`: the graph's nodes, edges, colours and marks, read back by a naive DOT parser."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import retrograd
from retrograd.cli import main
from retrograd.visualize import dot as dot_module
from retrograd.passes import Gradient
from codegen.helpers import CHECKPOINTED

ROOT = Path(__file__).resolve().parents[2]
MLP = ROOT / "examples" / "mlp.py"
FILES = sorted((ROOT / "tests" / "corpus").glob("c*.py")) + [MLP]

_NODE = re.compile(r'^\s*(n\d+) \[label="((?:[^"\\]|\\.)*)"(.*)\];$')
_EDGE = re.compile(r'^\s*(n\d+) -> (n\d+) \[label="((?:[^"\\]|\\.)*)"\];$')


def parse_dot(text: str):
    """{node id: (label, attribute text)}, [(src, dst, label)]; every other line must be structure."""
    nodes, edges = {}, []
    for line in text.splitlines():
        if m := _NODE.match(line):
            nodes[m.group(1)] = (m.group(2).replace("\\n", "\n"), m.group(3))
        elif m := _EDGE.match(line):
            edges.append((m.group(1), m.group(2), m.group(3)))
        else:
            assert re.match(r'^\s*(digraph|subgraph|label=|node \[|edge \[|\})', line), line
    for src, dst, _ in edges:
        assert src in nodes and dst in nodes
    assert text.count("{") == text.count("}")
    return nodes, edges


def by_label(nodes, prefix):
    found = [n for n, (label, _) in nodes.items() if label.startswith(prefix)]
    assert len(found) == 1, (prefix, found)
    return found[0]


def test_mlp_graph_has_an_op_node_per_binding_and_shape_labelled_edges():
    nodes, edges = parse_dot(retrograd.to_dot(retrograd.parse_file(MLP)))
    ops = sorted(label.split("\n")[0] for label, _ in nodes.values() if " = " in label)
    assert ops == sorted(["lv = R.matmul", "lv = R.add", "hidden = R.nn.relu", "lv = R.matmul", "logits = R.add",
                          "log_probs = R.nn.log_softmax", "loss = R.nn.nll_loss"])
    x, relu = by_label(nodes, "x\n"), by_label(nodes, "hidden = R.nn.relu")
    (first_matmul,) = [dst for src, dst, _ in edges if src == x]
    assert nodes[first_matmul][0].startswith("lv = R.matmul")
    assert (first_matmul, by_label(nodes, "w0\n")) not in edges
    into_relu = [lab for src, dst, lab in edges if dst == relu]
    assert into_relu == ["lv: Tensor((8, 32), float32)"]
    ret = by_label(nodes, "return")
    assert [lab for _, dst, lab in edges if dst == ret] == ["loss: Tensor((), float32)"]


def test_adjoint_colours_forward_and_backward_bindings():
    adj = Gradient("main")(retrograd.parse_file(MLP))
    nodes, _ = parse_dot(retrograd.to_dot(adj, func="main_adjoint"))
    fills = {label.split("\n")[0]: re.search(r'fillcolor="([^"]+)"', rest).group(1)
             for label, rest in nodes.values() if " = " in label}
    assert fills["hidden = R.nn.relu"] == fills["loss = R.nn.nll_loss"] == dot_module.FORWARD
    backward = [k for k in fills if "_adjoint" in k.split(" = ")[0] or "backward" in k]
    assert len(backward) >= 6
    assert all(fills[k] == dot_module.BACKWARD for k in backward)
    assert len(parse_dot(retrograd.to_dot(adj))[0]) > len(nodes)  # both functions without func=


def test_checkpointed_bindings_are_marked_recomputed():
    nodes, _ = parse_dot(retrograd.to_dot(retrograd.parse(CHECKPOINTED)))
    marked = {label.split(" = ")[0] for label, rest in nodes.values() if dot_module.RECOMPUTED in rest}
    assert marked == {"b", "c"}
    # The adjoint recomputes b and c behind barriers (b_cp, c_cp handed on as b_ckout, c_ckout): only those are
    # marked, all in the backward part; the forward copy (markers dropped) is not.
    adj = Gradient("main")(retrograd.parse(CHECKPOINTED))
    nodes, _ = parse_dot(retrograd.to_dot(adj, func="main_adjoint"))
    marked = {label.split(" = ")[0]: rest for label, rest in nodes.values() if dot_module.RECOMPUTED in rest}
    assert sorted(marked) == ["b_ckout", "b_cp", "c_ckout", "c_cp"]
    assert all(dot_module.BACKWARD in rest for rest in marked.values())


def test_if_draws_both_branches():
    text = retrograd.to_dot(retrograd.parse_file(ROOT / "tests" / "corpus" / "c16_if_else.py"))
    nodes, edges = parse_dot(text)
    cond = by_label(nodes, "y = If")
    assert sorted(lab for _, dst, lab in edges if dst == cond) == ["c: Tensor((), bool)", "else", "then"]
    assert by_label(nodes, "t = R.exp") and by_label(nodes, "y = R.negative") and by_label(nodes, "y = R.add")


def test_unknown_function_is_a_located_user_error(capsys):
    assert main(["dot", str(MLP), "--func", "nope"]) == 1
    assert "no function 'nope'" in capsys.readouterr().err


@pytest.mark.skipif(shutil.which("dot") is None, reason="the Graphviz dot program is not installed")
@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_graphviz_parses_the_dot(path):
    mod = retrograd.parse_file(path)
    for text in (retrograd.to_dot(mod),):
        done = subprocess.run(["dot", "-Tsvg"], input=text.encode(), capture_output=True, check=False)
        assert done.returncode == 0, done.stderr.decode()
        assert b"<svg" in done.stdout


@pytest.mark.skipif(shutil.which("dot") is None, reason="the Graphviz dot program is not installed")
def test_cli_renders_svg(tmp_path):
    out = tmp_path / "g.svg"
    done = subprocess.run([sys.executable, "-m", "retrograd", "dot", str(MLP), "--svg", "-o", str(out)],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert "<svg" in out.read_text() and "nll_loss" in out.read_text()


def test_render_without_graphviz_says_how_to_get_it(monkeypatch, capsys):
    monkeypatch.setattr(dot_module.shutil, "which", lambda name: None)
    monkeypatch.setitem(sys.modules, "graphviz", None)  # import graphviz raises ImportError
    assert main(["dot", str(MLP), "--png"]) == 1
    err = capsys.readouterr().err
    assert "needs Graphviz" in err and "Traceback" not in err
