"""The Trainer: runs a module made by `setup_trainer`, holding parameters and optimizer state as NumPy arrays."""

from __future__ import annotations

import os

import numpy as np

from retrograd.errors import TrainingError
from retrograd.ir.module import IRModule
from retrograd.ir.struct_info import TensorStructInfo
from retrograd.runtime import build
from retrograd.runtime.malloc import keep_freed_memory
from retrograd.runtime.params_io import view_raw
from retrograd.runtime.signature import Binder, Mismatch, compile_checker
from retrograd.training.assemble import LAYOUT_ATTRS
from retrograd.training.buffers import ONES, ZEROS
from retrograd.training.dropout_mode import DROPOUT_KEY
from retrograd.training.init import initial_value

_PARAM, _STATE, _BUFFER = "param/", "optimizer/", "buffer/"


class Trainer:
    """`Trainer(setup_trainer(...))`: `init_params`, `step(*batch) -> loss`, `predict`, `evaluate`, save and load.

    A batch is the inputs then the targets, in the order of `train_step`'s parameters. Parameters and
    optimizer state are dicts keyed by the names in the module (`param_names`, `state_names`), and so
    are an imported model's buffers (`buffers`, `buffer_names`: BatchNorm's running statistics), which
    each step updates, `predict` and `evaluate` read, and saving keeps.

    `backend="torch"` runs the steps on PyTorch tensors on `device` ("cpu", "cuda", ...): parameters and
    state then stay on the device between steps; `predict`, `state_dict` and the saved files are NumPy.
    """

    def __init__(self, mod: IRModule, *, backend: str = "numpy", device=None, **build_options):
        if "train_step" not in mod:
            raise TrainingError("the module has no 'train_step': make it with setup_trainer")
        step = mod["train_step"]
        try:
            n_in, n_param, n_target = (int(step.attrs[k]) for k in LAYOUT_ATTRS)
        except (KeyError, TypeError, ValueError):
            raise TrainingError(f"'train_step' lacks its layout attributes {', '.join(LAYOUT_ATTRS)}") from None
        ps = step.params
        self.mod = mod
        self.inputs = list(ps[:n_in])
        self.trained = list(ps[n_in:n_in + n_param])
        self.targets = list(ps[n_in + n_param:n_in + n_param + n_target])
        n_buf = int(step.attrs.get("num_buffer", 0))
        first_state = n_in + n_param + n_target + n_buf
        self.buffer_vars = list(ps[n_in + n_param + n_target:first_state])
        self.state_vars = list(ps[first_state:])
        self.param_names = [p.name_hint for p in self.trained]
        self.state_names = [p.name_hint for p in self.state_vars]
        self.buffer_names = [p.name_hint for p in self.buffer_vars]
        self._buffer_init = dict(zip(self.buffer_names, step.attrs.get("buffer_init", ())))
        for kind, names in (("parameter", self.param_names + self.buffer_names), ("state entry", self.state_names)):
            dup = sorted({n for n in names if names.count(n) > 1})
            if dup:
                raise TrainingError(f"two trained values share the {kind} name '{dup[0]}': names key the saved arrays")
        self._check_param = {p.name_hint: compile_checker(p.struct_info, p.name_hint, TrainingError) for p in self.trained}
        self._check_state = {p.name_hint: compile_checker(p.struct_info, p.name_hint, TrainingError)
                             for p in self.state_vars}
        self._check_buffer = {p.name_hint: compile_checker(p.struct_info, p.name_hint, TrainingError)
                              for p in self.buffer_vars}
        self._dtypes = {p.name_hint: getattr(p.struct_info, "dtype", None)
                        for p in self.trained + self.state_vars + self.buffer_vars}
        keep_freed_memory()  # steps free and reallocate the same arrays: keep their pages
        if backend != "numpy" or device is not None:
            build_options.update(backend=backend, device=device)
        self.exe = build(mod, **build_options)
        self.backend = backend
        self.params: dict[str, np.ndarray] | None = None
        self.state: dict[str, np.ndarray] | None = None
        self.buffers: dict[str, np.ndarray] | None = None

    # -- parameters -------------------------------------------------------------
    def init_params(self, method: str = "he_uniform", seed: int = 0, overrides: dict | None = None) -> None:
        """Initialise every parameter (`method`: zeros, xavier_uniform/normal, he_uniform/normal; 1-D ones
        start at zero) and reset the optimizer state. `overrides` maps names to a method or an array.
        A dropout key in the state starts at `seed << 32` (modulo 2**64): other seeds, other masks.
        Buffers start as PyTorch's reset_running_stats leaves them (running means 0, variances 1,
        num_batches_tracked 0; `overrides` may give them arrays)."""
        rng = np.random.default_rng(seed)
        overrides = dict(overrides or {})
        buffers = {k: overrides.pop(k) for k in self.buffer_names if k in overrides}
        unknown = sorted(set(overrides) - set(self.param_names))
        if unknown:
            raise TrainingError(f"init_params: no parameter named '{unknown[0]}' (parameters: {', '.join(self.param_names)})")
        values = {}
        for p in self.trained:
            s = p.struct_info
            if s.shape is None or not all(isinstance(d, int) for d in s.shape):
                raise TrainingError(f"init_params: parameter '{p.name_hint}' needs a static shape, has {s.shape}")
            how = overrides.get(p.name_hint, method)
            values[p.name_hint] = (np.asarray(how) if not isinstance(how, str)
                                   else initial_value(how, tuple(s.shape), s.dtype, rng))
        self.buffers = None
        self.set_params({**values, **self._reset_buffers(buffers)})
        if DROPOUT_KEY in self.state:
            self.state[DROPOUT_KEY] = np.array((seed << 32) % 2**64, np.uint64).astype(np.int64)

    def set_params(self, values: dict, reset_state: bool = True) -> None:
        """Take parameters by name (all of them, checked for shape and dtype); reset the optimizer state.

        Buffers may come too, all of them (an imported model's `params`, by IR name); without them the
        buffers keep their values, or start as `init_params` starts them."""
        given = {k: values[k] for k in self.buffer_names if k in values}
        values = {k: v for k, v in values.items() if k not in given}
        self.params = self._checked(values, self._check_param, "parameter")
        if given or self.buffers is None:
            self.buffers = self._checked(given or self._reset_buffers({}), self._check_buffer, "buffer")
        if reset_state or self.state is None:
            self.state = {p.name_hint: np.zeros(tuple(p.struct_info.shape), p.struct_info.dtype) for p in self.state_vars}

    def _reset_buffers(self, given: dict) -> dict:
        out = dict(given)
        for p in self.buffer_vars:
            name, s = p.name_hint, p.struct_info
            if name in out:
                continue
            how = self._buffer_init.get(name, "")
            if how not in (ZEROS, ONES) or s.shape is None or not all(isinstance(d, int) for d in s.shape):
                raise TrainingError(f"buffer '{name}' has no known starting value: give it to set_params (an "
                                    "imported model's params hold it) or to init_params(overrides=)")
            out[name] = (np.ones if how == ONES else np.zeros)(tuple(s.shape), s.dtype)
        return out

    def _checked(self, values: dict, checkers: dict, kind: str) -> dict:
        missing = [n for n in checkers if n not in values]
        extra = sorted(set(values) - set(checkers))
        if missing or extra:
            what = f"missing {kind} '{missing[0]}'" if missing else f"unknown {kind} '{extra[0]}'"
            raise TrainingError(f"{what} (expected: {', '.join(checkers)})")
        out = {}
        for name, check in checkers.items():
            try:
                value = view_raw(self._host(values[name]), self._dtypes[name])  # bfloat16 read back from .npz
                out[name] = np.array(check(value, Binder()), copy=True)
            except Mismatch as mm:
                raise TrainingError(f"{kind} {mm}") from None
        return out

    def _require_params(self, what: str) -> None:
        if self.params is None:
            raise TrainingError(f"{what} before the parameters exist: call init_params() or load_params() first")

    # -- running ----------------------------------------------------------------------
    @property
    def fixed_batch(self) -> int | None:
        """The one batch size a train step with a static leading input dim takes (one specialized for
        checkpointing, or a module written so); None: any."""
        s = self.inputs[0].struct_info if self.inputs else None
        return s.shape[0] if isinstance(s, TensorStructInfo) and s.shape and isinstance(s.shape[0], int) else None

    def step(self, *batch) -> float:
        """One training step on a batch (inputs, then targets); returns the loss before the update."""
        self._require_params("step()")
        inputs, targets = self._split(batch, len(self.inputs) + len(self.targets), "step")
        args = [*inputs, *(self.params[n] for n in self.param_names), *targets, *self._buffer_args(),
                *(self.state[n] for n in self.state_names)]
        loss, new_params, new_state, *new_buffers = self.exe["train_step"](*args)
        self.params = dict(zip(self.param_names, new_params))
        self.state = dict(zip(self.state_names, new_state))
        if new_buffers:
            self.buffers = dict(zip(self.buffer_names, new_buffers[0]))
        return float(loss)

    def _buffer_args(self) -> list:
        return [self.buffers[n] for n in self.buffer_names]

    def predict(self, *inputs):
        """The backbone's output for the inputs."""
        self._require_params("predict()")
        return self._host(self.exe["backbone"](*self._split(inputs, len(self.inputs), "predict")[0],
                                               *(self.params[n] for n in self.param_names), *self._buffer_args()))

    def _host(self, value):
        """A value of the executor as NumPy (the torch backend's tensors may live on a device)."""
        numpy = getattr(self.exe, "numpy", None)
        return value if numpy is None else numpy(value)

    def evaluate(self, *batch) -> float:
        """The loss on a batch (inputs, then targets), without updating anything."""
        self._require_params("evaluate()")
        inputs, targets = self._split(batch, len(self.inputs) + len(self.targets), "evaluate")
        return float(self.exe["backbone_loss"](*inputs, *(self.params[n] for n in self.param_names),
                                               *self._buffer_args(), *targets))

    def _split(self, batch, expected: int, who: str):
        if len(batch) != expected:
            names = [p.name_hint for p in self.inputs + (self.targets if expected > len(self.inputs) else [])]
            raise TrainingError(f"{who}() takes {expected} arrays ({', '.join(names)}), got {len(batch)}")
        return list(batch[:len(self.inputs)]), list(batch[len(self.inputs):])

    @property
    def steps_done(self) -> int:
        return int(self.state["step"]) if self.state and "step" in self.state else 0

    # -- saving -------------------------------------------------------------------------
    def export_params(self, path) -> None:
        """Write the parameters and the buffers to `.npz`, keyed by name."""
        self._require_params("export_params()")
        np.savez(_npz(path), **{k: self._host(v) for k, v in {**self.params, **self.buffers}.items()})

    def load_params(self, path) -> None:
        """Read parameters (and buffers) written by `export_params` (checked by name, shape and dtype);
        resets the optimizer state."""
        self.set_params(_read_npz(path))

    def state_dict(self) -> dict:
        """{"params": {...}, "optimizer": {...}} (and "buffers": {...} when the model has buffers):
        copies of everything needed to resume."""
        self._require_params("state_dict()")
        groups = {"params": self.params, "optimizer": self.state}
        if self.buffer_names:
            groups["buffers"] = self.buffers
        return {g: {k: np.array(self._host(v), copy=True) for k, v in d.items()} for g, d in groups.items()}

    def load_state_dict(self, state: dict) -> None:
        keys = {"params", "optimizer"} | ({"buffers"} if self.buffer_names else set())
        if set(state) != keys:
            raise TrainingError(f"a trainer state has exactly the keys {', '.join(sorted(keys))}")
        self.set_params({**state["params"], **state.get("buffers", {})})
        self.state = self._checked(state["optimizer"], self._check_state, "optimizer state")

    def save_state(self, path) -> None:
        """Parameters, optimizer state and buffers in one `.npz` (keys `param/NAME`, `optimizer/NAME`,
        `buffer/NAME`)."""
        sd = self.state_dict()
        arrays = {_PARAM + k: v for k, v in sd["params"].items()}
        arrays.update({_STATE + k: v for k, v in sd["optimizer"].items()})
        arrays.update({_BUFFER + k: v for k, v in sd.get("buffers", {}).items()})
        np.savez(_npz(path), **arrays)

    def load_state(self, path) -> None:
        arrays = _read_npz(path)
        prefixes = {"params": _PARAM, "optimizer": _STATE, **({"buffers": _BUFFER} if self.buffer_names else {})}
        bad = sorted(k for k in arrays if not k.startswith(tuple(prefixes.values())))
        if bad:
            raise TrainingError(f"{os.fspath(path)}: '{bad[0]}' is not a {', '.join(prefixes.values())} entry")
        self.load_state_dict({g: {k[len(pre):]: v for k, v in arrays.items() if k.startswith(pre)}
                              for g, pre in prefixes.items()})


def _npz(path):
    # np.savez appends ".npz" to names without it; say so by writing the name it would choose.
    path = os.fspath(path)
    return path if path.endswith(".npz") else path + ".npz"


def _read_npz(path) -> dict:
    try:
        with np.load(_npz(path), allow_pickle=False) as data:
            return {k: data[k] for k in data.files}
    except (OSError, ValueError) as err:
        raise TrainingError(f"cannot read {os.fspath(path)}: {err}") from None
