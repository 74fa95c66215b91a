"""`retrograd import --torch` and the parameter archive: the script and .npz it writes run (through
`retrograd run --inputs`) to PyTorch's outputs; save_params / load_params keep names and never unpickle."""

from __future__ import annotations

import numpy as np
import pytest

import retrograd
from retrograd.cli import main
from retrograd.errors import UsageError
from optional import need


def test_save_and_load_params_round_trip_dotted_names(tmp_path):
    params = {"layer.0.weight": np.arange(6, dtype="float32").reshape(2, 3), "bn.num_batches_tracked": np.array(3)}
    path = retrograd.save_params(tmp_path / "p", params)
    assert path.endswith("p.npz")
    back = retrograd.load_params(path)
    assert list(back) == list(params)
    for k in params:
        np.testing.assert_array_equal(back[k], params[k])
        assert back[k].dtype == params[k].dtype


def test_load_params_refuses_pickles_and_non_archives(tmp_path):
    pickled = tmp_path / "obj.npz"
    np.savez(pickled, a=np.array([{"x": 1}], dtype=object))
    with pytest.raises(UsageError, match="Python objects"):
        retrograd.load_params(pickled)
    npy = tmp_path / "one.npy"
    np.save(npy, np.zeros(3))
    with pytest.raises(UsageError, match="npz"):
        retrograd.load_params(npy)
    with pytest.raises(UsageError, match="cannot read"):
        retrograd.load_params(tmp_path / "missing.npz")


def test_import_torch_factory_then_run_with_the_params(tmp_path, capsys):
    torch = need("torch")
    from frontend import torch_factories

    script, archive = tmp_path / "m.py", tmp_path / "p.npz"
    rc = main(["import", "--torch", "tests.frontend.torch_factories:small_cnn", "--args", "2,3,8,8",
               "-o", str(script), "--params", str(archive)])
    assert rc == 0
    mod = retrograd.parse_file(script)
    params = retrograd.load_params(archive)
    assert "0.weight" in params and "1.running_var" in params
    x = np.random.default_rng(0).standard_normal((2, 3, 8, 8)).astype("float32")
    (y,) = retrograd.build(mod)["main"](x, *params.values())
    model = torch_factories.small_cnn().eval()
    with torch.no_grad():
        np.testing.assert_allclose(y, model(torch.from_numpy(x)).numpy(), rtol=1e-5, atol=1e-6)
    # `run --inputs` takes the archive's dotted names for the parameters' IR names.
    inputs = tmp_path / "all.npz"
    np.savez(inputs, input=x, **params)
    out = tmp_path / "out.npz"
    assert main(["run", str(script), "--inputs", str(inputs), "--save", str(out)]) == 0
    with np.load(out) as saved:
        np.testing.assert_allclose(saved["result_0"], y, rtol=1e-6)


def test_import_torch_int_inputs_symbolic_dims_and_tied_weights(tmp_path):
    need("torch")
    script, archive = tmp_path / "lm.py", tmp_path / "lm.npz"
    rc = main(["import", "--torch", "tests.frontend.torch_factories:tiny_lm", "--args", "2,5:int64",
               "--dynamic", "0:1=seq", "-o", str(script), "--params", str(archive)])
    assert rc == 0
    mod = retrograd.parse_file(script)
    assert mod["main"].params[0].struct_info.shape == (2, "seq")
    assert list(retrograd.load_params(archive)) == ["emb.weight"]  # the head's weight is the embedding's


@pytest.mark.parametrize("argv,message", [
    (["import"], "either a model file or --torch"),
    (["import", "m.tflite"], "no importer for '.tflite'"),
    (["import", "--torch", "nocolon"], "MODULE:FACTORY"),
    (["import", "--torch", "tests.frontend.torch_factories:missing", "--args", "1"], "missing"),
    (["import", "--torch", "tests.frontend.torch_factories:not_a_module", "--args", "1"], "not a torch.nn.Module"),
    (["import", "--torch", "tests.frontend.torch_factories:small_cnn", "--args", "1,3,x"], "comma-separated"),
    (["import", "--torch", "tests.frontend.torch_factories:small_cnn", "--args", "1,3,4,4:float7"], "unknown dtype"),
    (["import", "--torch", "tests.frontend.torch_factories:small_cnn"], "--args"),
])
def test_import_usage_errors(argv, message, capsys):
    need("torch")
    assert main(argv) != 0
    assert message in capsys.readouterr().err


def test_import_torch_factory_from_a_file_in_the_working_directory(tmp_path, monkeypatch, capsys):
    """`retrograd import --torch mymodel:build` finds mymodel.py in the current directory, as `python -m` does;
    a factory that raises is reported as the factory's error."""
    torch = need("torch")
    (tmp_path / "mymodel_cwd.py").write_text(
        "import torch\n"
        "def build():\n    torch.manual_seed(1)\n    return torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.Tanh())\n"
        "def broken():\n    raise RuntimeError('no weights here')\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.path", [p for p in __import__("sys").path if p not in ("", str(tmp_path))])
    assert main(["import", "--torch", "mymodel_cwd:build", "--args", "4,3", "-o", "m.py", "--params", "p.npz"]) == 0
    params = retrograd.load_params(tmp_path / "p.npz")
    x = np.random.default_rng(0).standard_normal((4, 3)).astype("float32")
    (y,) = retrograd.build(retrograd.parse_file(tmp_path / "m.py"))["main"](x, *params.values())
    w, b = (torch.from_numpy(params[k]) for k in ("0.weight", "0.bias"))
    np.testing.assert_allclose(y, torch.tanh(torch.from_numpy(x) @ w.T + b).numpy(), rtol=1e-6, atol=1e-7)
    capsys.readouterr()
    assert main(["import", "--torch", "mymodel_cwd:broken", "--args", "4,3"]) == 1
    assert "the factory failed: RuntimeError: no weights here" in capsys.readouterr().err
