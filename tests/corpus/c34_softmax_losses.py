# softmax, log_softmax, cross_entropy_with_logits, nll_loss with weights and reductions.
@I.ir_module
class Module:
    @R.function
    def main(logits: R.Tensor((4, 5), dtype="float32"), labels: R.Tensor((4, 5), dtype="float32"), t: R.Tensor((4,), dtype="int64"), wt: R.Tensor((5,), dtype="float32")):
        p = R.nn.softmax(logits, axis=1)
        lp = R.nn.log_softmax(logits)
        ce = R.nn.cross_entropy_with_logits(lp, labels)
        l1 = R.nn.nll_loss(lp, t, wt, reduction="sum", ignore_index=-1)
        l2 = R.nn.nll_loss(lp, t, reduction="none")
        return (p, ce, l1, l2)
