# Every way to write a tensor annotation: positional dtype, dtype=, ndim only, dtype only, bare R.Tensor.
@I.ir_module
class Module:
    @R.function
    def main(a: R.Tensor((3, 3), "float32"), b: R.Tensor((3, 3), dtype="float32"), c: R.Tensor(ndim=2, dtype="float32"), d: R.Tensor(dtype="float32"), e: R.Tensor) -> R.Tensor(dtype="float32", ndim=2):
        ab: R.Tensor((3, 3), dtype="float32") = R.add(a, b)
        abc: R.Tensor(dtype="float32", ndim=2) = R.add(ab, c)
        return abc
