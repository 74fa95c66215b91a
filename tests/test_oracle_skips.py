"""The conftest rule that turns skips of installed (or required) oracles into failures."""

from __future__ import annotations

from conftest import oracle_skip_problem


def test_a_skip_of_an_installed_oracle_is_a_problem():
    reason = "could not import 'tvm.script': No module named 'tvm.ffi'"
    assert "installed" in oracle_skip_problem(reason, installed=lambda n: True, require=False)


def test_a_skip_of_a_missing_oracle_is_fine_unless_required():
    reason = "could not import 'torch': No module named 'torch'"
    assert oracle_skip_problem(reason, installed=lambda n: False, require=False) is None
    assert "required" in oracle_skip_problem(reason, installed=lambda n: False, require=True)


def test_other_skips_are_left_alone():
    assert oracle_skip_problem("could not import 'scipy': nope", installed=lambda n: True, require=True) is None
    assert oracle_skip_problem("symbolic shapes", installed=lambda n: True, require=True) is None


def test_every_oracle_of_the_extra_is_covered():
    import tomllib
    from pathlib import Path

    from conftest import ORACLES

    extra = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())
    names = {dep.split("=")[0].split(">")[0].replace("apache-", "") for dep in extra["project"]["optional-dependencies"]["oracle"]}
    assert names == set(ORACLES)
    reason = "could not import 'onnxruntime': No module named 'onnxruntime'"
    assert "required" in oracle_skip_problem(reason, installed=lambda n: False, require=True)
