# Shape manipulation: permute_dims, expand_dims, squeeze, flatten, concat, split, take.
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 3), dtype="float32"), idx: R.Tensor((4,), dtype="int64")):
        t = R.permute_dims(x, axes=[1, 0])
        e = R.expand_dims(x, axis=[0])
        s = R.squeeze(e, axis=[0])
        f = R.flatten(x)
        c = R.concat((x, s), axis=0)
        parts = R.split(c, indices_or_sections=2, axis=0)
        first = parts[0]
        g = R.take(x, idx, axis=1)
        return (t, f, first, g)
