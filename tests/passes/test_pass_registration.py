"""A pass is one definition: its decorator names and registers it; user passes work in pipelines."""

import ast
import pathlib

import attrs
import numpy as np
import pytest
from passes.helpers import add_exp

import retrograd
import retrograd.distributed  # noqa: F401  (defines the data-parallel pass, outside retrograd/passes)
from retrograd.errors import PassError
from retrograd.passes import function_pass, list_passes, module_pass, parse_pipeline, pass_factory, unregister_pass
from retrograd.passes.infra import kebab_case

PASSES_DIR = pathlib.Path(retrograd.__file__).parent / "passes"
# Packages above passes that define passes too (data-parallel works on training's step).
PASS_DIRS = [PASSES_DIR, PASSES_DIR.parent / "distributed"]
DECORATORS = {"module_pass", "function_pass"}


def _decorated_definitions():
    """(pass name, module, qualname) of every decorated pass definition in PASS_DIRS, read from the source."""
    found = []
    for path in sorted(p for d in PASS_DIRS for p in d.rglob("*.py")):
        module = "retrograd." + ".".join(path.relative_to(PASSES_DIR.parent).with_suffix("").parts)
        module = module.removesuffix(".__init__")
        tree = ast.parse(path.read_text())
        for node in tree.body:
            if not isinstance(node, ast.FunctionDef | ast.ClassDef):
                continue
            for dec in node.decorator_list:
                target = dec.func if isinstance(dec, ast.Call) else dec
                if isinstance(target, ast.Name) and target.id in DECORATORS:
                    name = kebab_case(node.name)
                    for kw in dec.keywords if isinstance(dec, ast.Call) else ():
                        if kw.arg == "name":
                            name = ast.literal_eval(kw.value)
                    found.append((name, module, node.name))
    return found


def test_every_registered_pass_comes_from_exactly_one_definition():
    defs = _decorated_definitions()
    names = [name for name, _, _ in defs]
    assert len(names) == len(set(names)), names
    builtin = {name for name in list_passes() if pass_factory(name).__module__.startswith("retrograd.")}
    assert builtin == set(names)
    for name, module, qualname in defs:
        factory = pass_factory(name)
        assert (factory.__module__, factory.__qualname__) == (module, qualname)
    # No second place registers a pass: register_pass is called only inside the infrastructure.
    for path in (p for d in PASS_DIRS for p in d.rglob("*.py")):
        if "infra" in path.parts:
            continue
        calls = [
            n for n in ast.walk(ast.parse(path.read_text()))
            if isinstance(n, ast.Call) and getattr(n.func, "id", getattr(n.func, "attr", None)) == "register_pass"
        ]
        assert not calls, path


@function_pass(name="test-append-exp", aliases={"n": "times"})
class AppendExp:
    """Append `times` exp calls to every function's result (a user pass defined in a test file)."""

    times: int = 1

    def transform_function(self, func, mod, ctx):
        for _ in range(self.times):
            func = add_exp(func)
        return func


def teardown_module():
    unregister_pass("test-append-exp")


def test_user_pass_registers_and_runs_in_a_pipeline():
    assert "test-append-exp" in list_passes()
    mod = retrograd.parse(
        """
@R.function
def main(x: R.Tensor((4,), "float32")):
    y = R.add(x, x)
    return y
"""
    )
    seq = parse_pipeline("test-append-exp(times=2), dce, test-append-exp(n=1)")
    out = seq(mod)
    x = np.array([-1.0, -0.5, 0.0, 0.25], dtype="float32")
    want = np.exp(np.exp(np.exp(2.0 * x.astype(np.float64))))
    np.testing.assert_allclose(retrograd.build(out)["main"](x), want, rtol=1e-5)
    assert seq.passes[0].info.options == {"times": 2}
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        seq.passes[0].times = 3
    with pytest.raises(PassError, match="expects int"):
        parse_pipeline("test-append-exp(times=x)")


def test_definitions_inside_functions_do_not_register():
    @module_pass(name="test-local-pass")
    def local(mod, ctx):
        return mod

    assert "test-local-pass" not in list_passes()

    @module_pass(name="test-local-registered", register=True)
    def registered(mod, ctx):
        return mod

    try:
        assert pass_factory("test-local-registered") is registered
        with pytest.raises(ValueError, match="registered twice"):
            module_pass(name="test-local-registered", register=True)(lambda mod, ctx: mod)
    finally:
        unregister_pass("test-local-registered")


def test_a_module_level_name_clash_warns_and_keeps_the_first(tmp_path, monkeypatch):
    """Two files choosing the same derived name must both import; the first keeps the name."""
    (tmp_path / "user_passes_clash.py").write_text(
        "from retrograd.passes import module_pass\n\n"
        "@module_pass\n"
        "def simplify(mod, ctx):\n"
        "    return mod\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.warns(RuntimeWarning, match="'simplify' is already registered by retrograd.passes.simplify"):
        import user_passes_clash  # noqa: F401
    assert pass_factory("simplify").__module__ == "retrograd.passes.simplify"
