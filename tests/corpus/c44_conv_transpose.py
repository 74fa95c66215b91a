# conv2d_transpose with output_padding; positional attributes after the arguments.
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((1, 2, 4, 4), dtype="float32"), w: R.Tensor((2, 3, 3, 3), dtype="float32")):
        y = R.nn.conv2d_transpose(x, w, strides=[2, 2], padding=[1, 1, 1, 1], output_padding=[1, 1])
        z = R.nn.max_pool2d(y, [2, 2], [2, 2])
        return z
