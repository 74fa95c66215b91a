# A small CNN: conv2d with stride/padding/groups, max_pool2d and avg_pool2d with every attribute.
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 4, 8, 8), dtype="float32"), w: R.Tensor((6, 2, 3, 3), dtype="float32")) -> R.Tensor((2, 6, 2, 2), dtype="float32"):
        with R.dataflow():
            c = R.nn.conv2d(x, w, strides=[1, 1], padding=[1, 1, 1, 1], dilation=[1, 1], groups=2, data_layout="NCHW", kernel_layout="OIHW", out_layout="NCHW", out_dtype=None)
            r = R.nn.relu(c)
            p = R.nn.max_pool2d(r, pool_size=[2, 2], strides=[2, 2], dilation=[1, 1], padding=[0, 0, 0, 0], ceil_mode=False, count_include_pad=False, layout="NCHW", out_layout="NCHW")
            q = R.nn.avg_pool2d(p, pool_size=[2, 2], strides=[2, 2], dilation=[1, 1], padding=[0, 0, 0, 0], ceil_mode=True, count_include_pad=False, layout="NCHW", out_layout="NCHW")
            R.output(q)
        return q
