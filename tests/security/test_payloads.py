"""Text never runs as code: payloads in every place script and pipeline text can go are inert."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import retrograd
from retrograd.errors import DiagnosticError
from retrograd.passes import parse_pipeline


def payloads(sentinel: Path) -> list[str]:
    return [
        f"__import__('os').system('touch {sentinel}')",
        f"open('{sentinel}', 'w').write('x')",
        f"exec(\"open('{sentinel}','w')\")",
        f"eval(\"__import__('os').system('touch {sentinel}')\")",
    ]


PLACES = [
    "@R.function\ndef main(x: R.Tensor((2,), \"float32\")):\n    y = {p}\n    return y\n",
    "@R.function\ndef main(x: R.Tensor((2,), \"float32\")):\n    y = R.str({q})\n    return y\n",
    "@R.function\ndef main(x: R.Tensor(({q},), \"float32\")):\n    return x\n",
    "@R.function\ndef main(x: R.Tensor((2,), {q})):\n    return x\n",
    "@R.function\ndef main(x: R.Tensor((2,), \"float32\")):\n    R.func_attr({{{q}: {q}}})\n    return x\n",
    "@R.function\ndef main(x: R.Tensor((2,), \"float32\")):\n    y = R.nn.softmax(x, axis={p})\n    return y\n",
    "@R.function\ndef main(x: R.Tensor((2,), \"float32\")):\n    y = R.const({p})\n    return y\n",
    "# {p}\n@R.function\ndef main(x: R.Tensor((2,), \"float32\")):\n    return x\n",
    "@{p}\ndef main(x: R.Tensor((2,), \"float32\")):\n    return x\n",
    "metadata = {{{q}: [{p}]}}\n@R.function\ndef main(x: R.Tensor((2,), \"float32\")):\n    return x\n",
    "{p}\n",
    "@I.ir_module\nclass Module:\n    I.module_attrs({{{q}: {p}}})\n",
    '@R.function\ndef main(x: R.Tensor((2,), "float32")):\n    """{p}"""\n    return x\n',
    "@R.function\ndef main(x: R.Tensor((2,), \"float32\")) -> R.Tensor(({q},), \"float32\"):\n    return x\n",
]


@pytest.mark.parametrize("place", range(len(PLACES)))
def test_script_payloads_never_execute(tmp_path, place):
    sentinel = tmp_path / "pwned"
    for p in payloads(sentinel):
        text = PLACES[place].format(p=p, q=repr(p))
        try:
            mod = retrograd.parse(text)
            mod.script()
        except DiagnosticError:
            pass
        assert not sentinel.exists(), text


def test_pipeline_payloads_never_execute(tmp_path):
    sentinel = tmp_path / "pwned"
    mod = retrograd.parse('@R.function\ndef main(x: R.Tensor((2,), "float32")):\n    return x\n')
    for p in payloads(sentinel):
        for text in (f"gradient(func={p!r})", f"dce(remove_unused_functions={p!r})", p, f"{p}, dce"):
            try:
                parse_pipeline(text)(mod)
            except DiagnosticError:
                pass
            assert not sentinel.exists(), text


def test_the_grammar_cache_is_never_a_pickle_in_the_shared_temp_dir():
    import tempfile

    from retrograd.parser import grammar_cache

    assert not str(grammar_cache.cache_dir()).startswith(tempfile.gettempdir())
    source = Path(grammar_cache.__file__).read_text()
    assert "pickle" not in source.replace("never pickle", "").replace("(never pickle)", "")
    assert os.path.basename(grammar_cache.cache_dir()) == "retrograd"
