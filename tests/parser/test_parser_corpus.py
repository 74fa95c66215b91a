"""Every corpus script parses, verifies, round-trips through the printer, and agrees with TVM 0.27."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from retrograd.ir.block import BindingBlock
from retrograd.ir.expr import Call, Function, If, SeqExpr, Tuple, TupleGetItem, Var
from retrograd.ir.structural import assert_structural_equal
from retrograd.parser import parse, parse_file, print_module
from optional import need  # noqa: E402

CORPUS = sorted((Path(__file__).resolve().parents[1] / "corpus").glob("c*.py"))
IDS = [p.stem for p in CORPUS]


def _marker(path: Path, key: str) -> str | None:
    """A `# key: reason` line in the script's leading comments (TVM differences, documented there)."""
    m = re.search(rf"^\s*# {key}: (.*)$", path.read_text(), re.M)
    return m.group(1) if m else None


def _well_formed():
    try:
        from retrograd.ir import well_formed
    except ImportError:  # pragma: no cover - the verifier lands separately
        return None
    return well_formed


def test_corpus_is_large_enough():
    assert len(CORPUS) >= 40


@pytest.mark.parametrize("path", CORPUS, ids=IDS)
def test_corpus_roundtrip(path):
    mod = parse_file(path)
    check = _well_formed()
    if check is not None:
        assert check(mod) == []
    text = print_module(mod)
    back = parse(text, source_name="printed")
    if check is not None:
        assert check(back) == []
    try:
        assert_structural_equal(mod, back)
    except AssertionError as err:
        raise AssertionError(f"{err}\n--- printed ---\n{text}") from None
    assert print_module(back) == text, "printing is not a fixpoint"


@pytest.mark.parametrize("path", CORPUS, ids=IDS)
def test_corpus_nodes_carry_spans(path):
    """Every binding, bound var and call the parser makes points into the script."""
    mod = parse_file(path)
    n_lines = path.read_text().count("\n") + 1
    stack = [f for f in mod.functions().values()]
    seen = 0
    while stack:
        node = stack.pop()
        if isinstance(node, Function):
            _check_span(node.span, path, n_lines)
            for p in node.params:
                _check_span(p.span, path, n_lines)
                seen += 1
            stack.append(node.body)
        elif isinstance(node, SeqExpr):
            for block in node.blocks:
                assert isinstance(block, BindingBlock)
                for b in block.bindings:
                    _check_span(b.span, path, n_lines)
                    _check_span(b.var.span, path, n_lines)
                    seen += 1
                    stack.append(b.value)
        elif isinstance(node, If):
            _check_span(node.span, path, n_lines)
            stack.extend([node.true_branch, node.false_branch])
        elif isinstance(node, Call | Tuple | TupleGetItem):
            _check_span(node.span, path, n_lines)
    assert seen > 0


def _check_span(span, path, n_lines):
    assert span is not None
    assert span.source_name == str(path)
    assert 1 <= span.line <= n_lines and span.col >= 1
    assert span.source_line() is not None


# -- TVM 0.27 as the oracle of the format ----------------------------------------------------


@pytest.mark.parametrize("path", CORPUS, ids=IDS)
def test_tvm_parses_our_text(path):
    tvm_script = need("tvm.script")
    text = print_module(parse_file(path))
    tvm_script.from_source(text)


@pytest.mark.parametrize("path", CORPUS, ids=IDS)
def test_tvm_text_parses_to_an_equal_module(path):
    tvm_script = need("tvm.script")
    reason = _marker(path, "tvm-source")
    if reason:
        pytest.skip(f"TVM cannot read this script: {reason}")
    reason = _marker(path, "tvm-text")
    if reason:
        pytest.skip(f"TVM's printed text cannot be read back: {reason}")
    ours = parse_file(path)
    tvm_text = tvm_script.from_source(path.read_text()).script()
    theirs = parse(tvm_text, source_name="tvm-printed")
    try:
        assert_structural_equal(ours, theirs)
    except AssertionError as err:
        raise AssertionError(f"{err}\n--- TVM printed ---\n{tvm_text}") from None


def test_tvm_text_marker_reasons_hold():
    """The skips above are real: TVM's text of those scripts does reference omitted metadata."""
    tvm_script = need("tvm.script")
    marked = [p for p in CORPUS if _marker(p, "tvm-text")]
    assert marked
    for p in marked:
        assert 'metadata["ir.GenericConst"]' in tvm_script.from_source(p.read_text()).script()


def test_example_mlp_parses_in_both():
    path = Path(__file__).resolve().parents[2] / "examples" / "mlp.py"
    mod = parse_file(path)
    func = mod["main"]
    assert [p.name_hint for p in func.params] == ["x", "w0", "b0", "w1", "b1", "targets"]
    assert func.ret_struct_info.shape == ()
    ops = [b.value.op.name for blk in func.body.blocks for b in blk.bindings if isinstance(b.value, Call)]
    assert ops == ["relax.matmul", "relax.add", "relax.nn.relu", "relax.matmul", "relax.add",
                   "relax.nn.log_softmax", "relax.nn.nll_loss"]
    tvm_script = need("tvm.script")
    theirs = parse(tvm_script.from_source(path.read_text()).script())
    assert_structural_equal(mod, theirs)
    assert all(isinstance(v, Var) for v in func.params)
