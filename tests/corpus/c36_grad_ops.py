# The explicit backward ops and gradient markers of R.grad.
@I.ir_module
class Module:
    @R.function
    def main(g: R.Tensor((4, 3), dtype="float32"), w: R.Tensor((10, 3), dtype="float32"), idx: R.Tensor((4,), dtype="int64"), x: R.Tensor((1, 2, 4, 4), dtype="float32"), gp: R.Tensor((1, 2, 2, 2), dtype="float32"), lp: R.Tensor((4, 5), dtype="float32"), t: R.Tensor((4,), dtype="int64"), gl: R.Tensor((), dtype="float32")):
        a = R.grad.take_backward(g, w, idx, axis=0)
        b = R.grad.max_pool2d_backward(gp, x, pool_size=[2, 2], strides=[2, 2], padding=[0, 0, 0, 0], dilation=[1, 1], ceil_mode=False, count_include_pad=False, layout="NCHW", out_layout="NCHW")
        c = R.grad.avg_pool2d_backward(gp, x, pool_size=[2, 2], strides=[2, 2], padding=[0, 0, 0, 0], dilation=[1, 1], ceil_mode=False, count_include_pad=True, layout="NCHW")
        d = R.grad.nll_loss_backward(gl, lp, t, reduction="mean", ignore_index=-100)
        e = R.grad.no_grad(w)
        s = R.grad.start_checkpoint(x)
        f = R.grad.end_checkpoint(s)
        return (a, b, c, d, e, f)
