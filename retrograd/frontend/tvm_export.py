"""`to_tvm`: a retrograd IRModule as a TVM IRModule, through the script text TVM parses."""

from __future__ import annotations

from retrograd.errors import UnsupportedError


def to_tvm(mod):
    """The TVM IRModule of `mod`: its script (constants in the metadata section, which TVM's parser
    evaluates before the module) read by `tvm.script.from_source`. Needs apache-tvm."""
    try:
        from tvm import script as tvm_script
    except ImportError as err:
        raise UnsupportedError(f"to_tvm needs TVM (the oracle extra: pip install apache-tvm): {err}") from None
    text = mod.script()
    notes = [line for line in text.splitlines() if line.startswith("# not loadable in TVM:")]
    if notes:
        raise UnsupportedError("to_tvm: the module has no TVM spelling: " + "; ".join(n[len("# not loadable in TVM: "):] for n in notes))
    return tvm_script.from_source(text)
