"""`build(mod, backend="torch", compile=True)`: the module's torch source (runtime/torch_source.py, the plan's
statements and frees) run through torch.compile. Arguments are checked and moved as by the eager torch
executor; inside a compiled function the meter sees nothing, so `stats.peak_live_bytes` is the memory
model's prediction (`retrograd.analysis.peak_memory`, what the eager backend measures), and on CUDA
`device_max_allocated_bytes` is measured."""

from __future__ import annotations

import shutil

from retrograd.errors import ExecutionError, UnsupportedError
from retrograd.runtime.torch_exec import TorchExecutable, TorchFunction, TorchRunStats, TorchMeter
from retrograd.runtime.torch_source import lower_to_torch


def compile_available(torch) -> str | None:
    """None when torch.compile can run here, else why not."""
    if not hasattr(torch, "compile"):
        return f"this PyTorch ({torch.__version__}) has no torch.compile"
    if not any(shutil.which(cc) for cc in ("cc", "gcc", "clang", "c++", "g++")):
        return "torch.compile's CPU code generation needs a C++ compiler (none found on PATH): install gcc or clang, or build without compile=True"
    return None


class CompiledTorchExecutable(TorchExecutable):
    def __init__(self, mod, device="cpu", *, numpy_outputs: bool = False):
        super().__init__(mod, device, numpy_outputs=numpy_outputs)
        why = compile_available(self.torch)
        if why is not None:
            raise UnsupportedError(f"compile=True: {why}")
        namespace: dict = {}
        source = lower_to_torch(mod, "compiled")
        source = source.replace('DEVICE = "cpu"', "DEVICE = __device__", 1)
        namespace["__device__"] = self.device
        exec(compile(source, "<retrograd torch source>", "exec"), namespace)  # noqa: S102 - generated from the IR above
        self.source = source
        # On CPU, Inductor's switch of convolutions to channels-last costs more than it saves (layout copies
        # around mkldnn's kernels: MNIST net step 91-94 vs 82-84 ms CPU time, one thread).
        options = {"layout_optimization": False} if self.device.type == "cpu" else None
        self._compiled = {name: self.torch.compile(namespace[_py_name(name)], dynamic=False, options=options)
                          for name in self._programs}
        self._peaks: dict = {}

    def __getitem__(self, name: str):
        fn = self._functions.get(name)
        if fn is None:
            if name not in self._programs:
                raise ExecutionError(f"the module has no function '{name}' (functions: {', '.join(self._programs)})")
            fn = self._functions[name] = CompiledFunction(self, self._programs[name])
        return fn


def _py_name(name: str) -> str:
    from retrograd.runtime.torch_source import safe_name

    return safe_name(name)


class CompiledFunction(TorchFunction):
    __slots__ = ()

    def __call__(self, *args, **kwargs):
        exe = self.exe
        torch = exe.torch
        prog = self.prog
        if kwargs:
            from retrograd.runtime.executor import bind_arguments

            args = bind_arguments(prog, args, kwargs)
        if len(args) != prog.nparams:
            raise ExecutionError(f"{prog.name}: expects {prog.nparams} argument(s) ({', '.join(prog.param_names)}), got {len(args)}")
        from retrograd.runtime.signature import Binder, Mismatch, check_deferred

        binder, m = Binder(), TorchMeter(exe._skip)
        try:
            bound = [exe._to_device(check(exe._proxy(a), binder), a) for (_, check), a in zip(prog.params, args)]
            check_deferred(binder)
        except Mismatch as mm:
            raise ExecutionError(f"{prog.name}: parameter {mm}") from None
        for v in bound:
            exe._acquire(v, m, 2)
        cuda = exe.device.type == "cuda"
        if cuda:
            torch.cuda.synchronize(exe.device)
            torch.cuda.reset_peak_memory_stats(exe.device)
        try:
            with torch.no_grad():
                result = exe._compiled[prog.name](*bound)
        except Exception as err:  # a compiler failure (no toolchain, unsupported op) or a kernel error
            raise ExecutionError(f"{prog.name}: the compiled function failed: {type(err).__name__}: {str(err)[:500]}") from None
        peak = exe._peaks.get(prog.name)
        if peak is None:
            from retrograd.analysis import peak_memory

            try:
                peak = exe._peaks[prog.name] = peak_memory(exe.mod, prog.name)
            except Exception:
                peak = exe._peaks[prog.name] = -1
        device_peak = None
        if cuda:
            torch.cuda.synchronize(exe.device)
            device_peak = int(torch.cuda.max_memory_allocated(exe.device))
        exe.stats = TorchRunStats(prog.name, peak, m.cur, device_peak)
        return exe.numpy(result) if exe.numpy_outputs else result
