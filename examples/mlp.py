# A 2-layer MLP classifier with its loss: the module `retrograd` reads, differentiates and runs.
# Plain TVMScript: TVM 0.27 loads the same text with tvm.script.from_source (imports stay comments).
# from tvm.script import ir as I
# from tvm.script import relax as R


@I.ir_module
class Module:
    @R.function
    def main(
        x: R.Tensor((8, 16), dtype="float32"),
        w0: R.Tensor((16, 32), dtype="float32"),
        b0: R.Tensor((32,), dtype="float32"),
        w1: R.Tensor((32, 10), dtype="float32"),
        b1: R.Tensor((10,), dtype="float32"),
        targets: R.Tensor((8,), dtype="int64"),
    ) -> R.Tensor((), dtype="float32"):
        with R.dataflow():
            hidden = R.nn.relu(R.matmul(x, w0) + b0)
            logits = R.matmul(hidden, w1) + b1
            log_probs = R.nn.log_softmax(logits, axis=-1)
            loss = R.nn.nll_loss(log_probs, targets, reduction="mean")
            R.output(loss)
        return loss
