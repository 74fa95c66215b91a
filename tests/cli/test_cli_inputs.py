"""The command on bad command lines and files: one-line errors, never tracebacks; random inputs that fit."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from retrograd.cli import main
from retrograd.cli.inputs import index_bounds as _index_bounds
from retrograd.parser import parse

ROOT = Path(__file__).resolve().parents[2]
MLP = str(ROOT / "examples" / "mlp.py")


def run(argv, capsys) -> tuple[int, str]:
    rc = main(argv)
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    return rc, captured.err


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["check", "{tmp}"], "is a directory"),
        (["opt", MLP, "-o", "{tmp}"], "is a directory"),
        (["check", "{tmp}/utf16.py"], "UTF-16"),
        (["check", "{tmp}/latin1.py"], "not UTF-8"),
        (["opt", MLP, "-p", 'gradient(func="\\x")'], "truncated \\x escape"),
        (["opt", MLP, "-p", "gradient(func=" + "[" * 3000 + ")"], "nested too deeply"),
        (["run", MLP, "--dim", "n=99999999999999999999"], "larger than"),
        (["run", MLP, "--dim", "n=١٢"], "NAME=SIZE"),
        (["run", MLP, "--seed", "-1"], "non-negative"),
        (["run", MLP, "--inputs", "{tmp}/a.npy"], "holds one array (.npy)"),
        (["run", MLP, "--inputs", "{tmp}/broken.npz"], "cannot read inputs"),
    ],
)
def test_bad_command_lines_are_one_line_errors(tmp_path, capsys, argv, fragment):
    (tmp_path / "utf16.py").write_bytes("x = 1\n".encode("utf-16"))
    (tmp_path / "latin1.py").write_bytes(b'x = "\xe9"\n')
    np.save(tmp_path / "a.npy", np.zeros(3))
    (tmp_path / "broken.npz").write_bytes(b"PK\x03\x04 not really")
    rc, err = run([a.replace("{tmp}", str(tmp_path)) for a in argv], capsys)
    assert rc == 1 and fragment in err, err


def test_an_empty_npz_means_all_inputs_are_random(tmp_path, capsys):
    np.savez(tmp_path / "empty.npz")
    rc, _ = run(["run", MLP, "--inputs", str(tmp_path / "empty.npz")], capsys)
    assert rc == 0


def test_pipeline_errors_point_into_the_pipeline_text(capsys):
    rc, err = run(["opt", MLP, "-p", 'dce, gradient(func="mäin")'], capsys)
    assert rc == 1
    head, quoted, caret = err.splitlines()[:3]
    assert head.startswith("<pipeline>:1:6:") and "'mäin'" in head
    assert quoted.strip() == 'dce, gradient(func="mäin")'
    assert quoted[caret.index("^") :].startswith("gradient(")


def test_random_targets_stay_below_the_class_count(tmp_path, capsys):
    text = Path(MLP).read_text().replace("(8, ", "(64, ").replace("(8,)", "(64,)")
    path = tmp_path / "mlp64.py"
    path.write_text(text)
    rc, err = run(["run", str(path)], capsys)
    assert rc == 0, err


def test_index_bounds_follow_the_indexed_axis():
    mod = parse(
        '@R.function\ndef main(x: R.Tensor((5, 7), "float32"), i: R.Tensor((30,), "int64"), '
        'j: R.Tensor((30,), "int64"), lp: R.Tensor((30, 3), "float32")):\n'
        "    a = R.take(x, i, axis=1)\n    b = R.take(x, j, axis=0)\n    c = R.nn.nll_loss(lp, j)\n    return (a, b, c)\n"
    )
    # j indexes axis 0 of x (5 rows) and 3 classes: the tighter bound wins.
    assert _index_bounds(mod["main"], {}) == {"i": 7, "j": 3}
