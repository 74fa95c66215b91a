# @I.ir_module(s_tir=True) and check_well_formed=False are accepted.
@I.ir_module(s_tir=True)
class Module:
    @R.function(check_well_formed=False)
    def main(x: R.Tensor((2,), dtype="float32")) -> R.Tensor((2,), dtype="float32"):
        return x
