# A 2-layer MLP with bias, relu, log_softmax and nll_loss; nested calls are normalized into bindings.
# from tvm.script import ir as I
# from tvm.script import relax as R

@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4, 8), dtype="float32"), w0: R.Tensor((8, 16), dtype="float32"), b0: R.Tensor((16,), dtype="float32"), w1: R.Tensor((16, 3), dtype="float32"), b1: R.Tensor((3,), dtype="float32"), y: R.Tensor((4,), dtype="int64")) -> R.Tensor((), dtype="float32"):
        with R.dataflow():
            h = R.nn.relu(R.add(R.matmul(x, w0, out_dtype=None), b0))
            logits = R.add(R.matmul(h, w1), b1)
            logp = R.nn.log_softmax(logits, axis=-1)
            loss = R.nn.nll_loss(logp, y, reduction="mean", ignore_index=-100)
            R.output(loss)
        return loss
