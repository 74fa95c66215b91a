"""`retrograd import`: a model from another framework as a script plus its parameters (.npz).

    retrograd import --torch pkg.mod:factory --args "1,3,224,224" -o model.py --params params.npz
    retrograd import model.onnx -o model.py --params params.npz

The source decides the importer: `--torch` calls the factory and exports its module with torch.export;
a `.onnx` path goes to `retrograd.frontend.from_onnx`. IMPORTERS maps a file suffix to the function
that reads such a file into (module, params); a new format adds an entry.
"""

from __future__ import annotations

import importlib
import os
import sys

from retrograd.cli.common import write_output
from retrograd.errors import UsageError

_DTYPES = ("float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool")


def _from_onnx_file(path: str):
    try:
        from_onnx = importlib.import_module("retrograd.frontend").from_onnx
    except AttributeError:
        raise UsageError("this retrograd has no ONNX importer (retrograd.frontend.from_onnx)") from None
    return from_onnx(path)


IMPORTERS = {".onnx": _from_onnx_file}


def add_parser(sub) -> None:
    p = sub.add_parser(
        "import", help="import a PyTorch module or a model file as a script and an .npz of parameters",
        description="Import a PyTorch module (--torch MODULE:FACTORY, exported with torch.export on inputs of "
        "the --args shapes) or a model file (.onnx) into a script (-o) and its parameters (--params, an .npz "
        "keyed by the framework's own names, which `run --inputs` and `train --params` accept).",
    )
    p.add_argument("model", nargs="?", help="a model file (.onnx); leave out with --torch")
    p.add_argument("--torch", metavar="MODULE:FACTORY",
                   help="a Python function returning the torch.nn.Module to import (called without arguments)")
    p.add_argument("--args", action="append", metavar="SHAPE[:DTYPE]",
                   help='the shape of one example input, e.g. "1,3,224,224" or "1,16:int64" (repeat per input; '
                   "float32 unless a dtype is given)")
    p.add_argument("--dynamic", action="append", metavar="INPUT:AXIS=NAME",
                   help='make an input axis a symbolic dim, e.g. "0:0=batch" (repeatable)')
    p.add_argument("--eval", dest="train", action="store_false", default=False,
                   help="import the module in evaluation mode (the default)")
    p.add_argument("--train", dest="train", action="store_true", help="import the module in training mode")
    p.add_argument("-o", "--output", help="the script to write (default: standard output)")
    p.add_argument("--params", metavar="FILE.npz", help="where to write the parameters")
    p.set_defaults(run=cmd_import)


def cmd_import(args) -> int:
    if (args.model is None) == (args.torch is None):
        raise UsageError("give either a model file or --torch MODULE:FACTORY")
    if args.torch is not None:
        mod, params = _import_torch(args)
    else:
        suffix = "." + args.model.rsplit(".", 1)[-1].lower() if "." in args.model else ""
        if suffix not in IMPORTERS:
            known = ", ".join(sorted(IMPORTERS))
            raise UsageError(f"{args.model}: no importer for '{suffix or 'no suffix'}' files (known: {known}); "
                             "for a PyTorch module use --torch MODULE:FACTORY")
        mod, params = IMPORTERS[suffix](args.model)
    write_output(mod.script(), args.output)
    if args.params:
        import retrograd

        retrograd.save_params(args.params, params)
    elif params:
        import sys

        sys.stderr.write(f"note: {len(params)} parameters not written (give --params FILE.npz)\n")
    return 0


def example_inputs(specs, torch):
    """Example tensors from --args SHAPE[:DTYPE] (random normal floats, small non-negative integers)."""
    out = []
    for spec in specs or []:
        shape_text, _, dtype = spec.partition(":")
        dtype = dtype or "float32"
        if dtype not in _DTYPES:
            raise UsageError(f"--args {spec}: unknown dtype '{dtype}' (one of {', '.join(_DTYPES)})")
        try:
            shape = tuple(int(d) for d in shape_text.split(",") if d.strip())
        except ValueError:
            raise UsageError(f"--args {spec}: expected comma-separated sizes such as 1,3,224,224") from None
        if any(d < 0 for d in shape):
            raise UsageError(f"--args {spec}: sizes must be non-negative")
        gen = torch.Generator().manual_seed(len(out))
        tdtype = getattr(torch, dtype)
        if tdtype.is_floating_point:
            out.append(torch.randn(shape, generator=gen).to(tdtype))
        else:
            out.append(torch.randint(0, 2, shape, generator=gen).to(tdtype))
    return tuple(out)


def _import_torch(args):
    try:
        import torch
    except ImportError:
        raise UsageError("--torch needs PyTorch: pip install 'retrograd[torch]'") from None
    from retrograd.frontend import from_exported_program
    from retrograd.frontend.torch_import import dim_names

    module_name, _, attr = args.torch.partition(":")
    if not module_name or not attr:
        raise UsageError(f"--torch {args.torch}: expected MODULE:FACTORY, e.g. torchvision.models:resnet18")
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # MODULE may be a file in the working directory, as for `python -m`
    try:
        factory = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as err:
        raise UsageError(f"--torch {args.torch}: {err}") from None
    try:
        model = factory()
    except Exception as err:  # the user's factory failing is their error, reported as such
        raise UsageError(f"--torch {args.torch}: the factory failed: {type(err).__name__}: {err}") from None
    if not isinstance(model, torch.nn.Module):
        raise UsageError(f"--torch {args.torch}: the factory returned a {type(model).__name__}, not a torch.nn.Module")
    model.train(args.train)
    inputs = example_inputs(args.args, torch)
    if not inputs:
        raise UsageError("--torch needs the example inputs' shapes: --args 1,3,224,224 (one per input)")
    dynamic = _dynamic(args.dynamic, len(inputs), torch)
    try:
        ep = torch.export.export(model, inputs, dynamic_shapes=dynamic, strict=False)
    except Exception as err:  # the model's own error on these inputs, reported as such
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise UsageError(f"--torch {args.torch}: torch.export failed on inputs of shapes "
                         f"{', '.join(args.args)}: {type(err).__name__}: {first}") from None
    return from_exported_program(ep, dim_names=dim_names(ep, dynamic))


def _dynamic(items, n_inputs: int, torch):
    if not items:
        return None
    spec = [{} for _ in range(n_inputs)]
    dims = {}
    for item in items:
        where, _, name = item.partition("=")
        i, _, axis = where.partition(":")
        if not (i.isdigit() and axis.isdigit() and name.isidentifier()) or int(i) >= n_inputs:
            raise UsageError(f"--dynamic {item}: expected INPUT:AXIS=NAME with INPUT < {n_inputs}, e.g. 0:0=batch")
        dims.setdefault(name, torch.export.Dim(name))
        spec[int(i)][int(axis)] = dims[name]
    return tuple(s or None for s in spec)
