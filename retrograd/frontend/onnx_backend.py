"""An `onnx.backend.base.Backend` over retrograd: ONNX's backend test runners drive `from_onnx` + `build`.

A value the importer must read at import time (a Reshape's shape given as a graph input) is fixed
from the inputs of the first `run` (the model is specialized then); `BackendRep.specialized` names
those inputs, so that coverage counts can tell such cases apart.
"""

from __future__ import annotations

import numpy as np

from retrograd.frontend.onnx_import import from_onnx
from retrograd.frontend.onnx_ops import NeedsConstant


class RetrogradRep:
    """A prepared model: run(inputs) -> list of output arrays."""

    def __init__(self, model):
        self.model = model
        self.specialized: list[str] = []
        self._fn = None
        self._params = None
        self._key = None
        try:
            self._load({})
        except NeedsConstant:
            pass  # fixed from the inputs of run()

    def _load(self, static: dict):
        from retrograd.runtime.executor import build

        mod, params = from_onnx(self.model, static_inputs=static)
        self._fn = build(mod)["main"]
        self._params = list(params.values())
        self._static = static

    def _input_names(self):
        inits = {t.name for t in self.model.graph.initializer}
        return [vi.name for vi in self.model.graph.input if vi.name not in inits]

    def run(self, inputs, **kwargs):
        names = self._input_names()
        if isinstance(inputs, dict):
            values = dict(inputs)
        else:
            values = dict(zip(names, inputs if isinstance(inputs, list | tuple) else [inputs]))
        values = {k: to_array(v) for k, v in values.items()}
        if self._fn is None:
            static: dict = {}
            while True:  # fix each import-time input the importer asks for
                try:
                    self._load(static)
                    break
                except NeedsConstant as need:
                    if need.name not in values or need.name in static:
                        raise
                    static[need.name] = np.asarray(values[need.name])
            self.specialized = sorted(static)
        args = [np.asarray(values[n]) for n in names if n not in self._static] + self._params
        out = self._fn(*args)
        outs = list(out) if isinstance(out, tuple | list) else [out]
        return [np.asarray(o) for o in outs]


def to_array(value) -> np.ndarray:
    """A NumPy array of an array or an onnx TensorProto (the node cases give some values so)."""
    if type(value).__name__ == "TensorProto":
        from onnx import numpy_helper

        return numpy_helper.to_array(value)
    return np.asarray(value)


class RetrogradBackend:
    """onnx.backend.base.Backend's interface (prepare, run_model, run_node, supports_device)."""

    @classmethod
    def is_compatible(cls, model, device="CPU", **kwargs) -> bool:
        return True

    @classmethod
    def prepare(cls, model, device="CPU", **kwargs) -> RetrogradRep:
        return RetrogradRep(model)

    @classmethod
    def run_model(cls, model, inputs, device="CPU", **kwargs):
        return cls.prepare(model, device).run(inputs)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return device == "CPU"


def backend():
    """RetrogradBackend registered as a subclass of onnx's Backend (onnx imported only here)."""
    from onnx.backend.base import Backend

    return type("RetrogradOnnxBackend", (RetrogradBackend, Backend), {})
