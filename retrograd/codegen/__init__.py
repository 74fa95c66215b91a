"""Source code generation: a module's plans written as readable, standalone Python over the public kernels
(`retrograd lower`); `python.py` writes it, `kernel_refs.py` says how it names kernels and constants. The
PyTorch source of `retrograd lower --backend torch` is the torch backend's (runtime/torch_source.py)."""

from retrograd.codegen.python import lower_to_python

__all__ = ["lower_to_python"]
