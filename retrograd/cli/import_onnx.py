"""`retrograd import model.onnx -o model.py --params params.npz`: the ONNX part of the `import` command.

The `import` subcommand's dispatcher calls `import_onnx_command(args)` for `.onnx` paths, with
`args.model` (the ONNX file), `args.output` (the script, '-' or None for standard output) and
`args.params` (the npz of the weights, optional).
"""

from __future__ import annotations

import numpy as np

from retrograd.cli.common import verify, write_output


def save_params_npz(params: dict, path: str) -> None:
    """The weights as an npz keyed by mod["main"]'s parameter names (until retrograd.save_params exists)."""
    np.savez(path, **params)


def import_onnx(model_path: str, output: str | None, params_path: str | None) -> dict:
    """Import `model_path`, write its script to `output` and its weights to `params_path`; the weights
    are keyed by mod["main"]'s parameter names (the ONNX initializer names made identifiers)."""
    from retrograd.frontend.onnx_import import from_onnx

    mod, params = from_onnx(model_path)
    verify(mod, model_path)
    func = mod["main"]
    names = [p.name_hint for p in func.params[len(func.params) - len(params):]]
    by_ir_name = dict(zip(names, params.values()))
    write_output(mod.script(), output)
    if params_path:
        save_params_npz(by_ir_name, params_path)
    return by_ir_name


def import_onnx_command(args) -> int:
    import_onnx(args.model, getattr(args, "output", None), getattr(args, "params", None))
    return 0
