# Transformer and CNN building blocks: norms, attention, dropout, pad, activations, 1-D conv and pools.
@I.ir_module
class Module:
    @R.function
    def block(x: R.Tensor((2, 4, 8), dtype="float32"), g: R.Tensor((8,), dtype="float32"), b: R.Tensor((8,), dtype="float32")):
        with R.dataflow():
            h = R.nn.layer_norm(x, g, b, axes=[-1], epsilon=1e-05)
            q = R.reshape(h, R.shape([2, 4, 2, 4]))
            a = R.nn.attention(q, q, q, causal_mask="TopLeft")
            r = R.nn.rms_norm(R.reshape(a, R.shape([2, 4, 8])), g)
            d = R.nn.dropout(r, rate=0.1)
            y = R.nn.gelu_tanh(d[0])
            R.output(y)
        return y

    @R.function
    def cnn(x: R.Tensor((2, 4, 16), dtype="float32"), w: R.Tensor((6, 4, 3), dtype="float32"), c: R.Tensor((6,), dtype="float32")):
        with R.dataflow():
            p = R.nn.pad(x, [0, 0, 0, 0, 1, 1], "reflect")
            y = R.nn.conv1d(p, w, strides=1, padding=[0, 0])
            bn = R.nn.batch_norm(y, c, c, c, c, axis=1, training=False)
            z = R.nn.leakyrelu(bn[0], alpha=0.2)
            z2 = R.nn.group_norm(z, c, c, num_groups=2, channel_axis=1, axes=[2])
            m = R.nn.max_pool1d(z2, pool_size=[2], strides=[2])
            s = R.nn.adaptive_avg_pool1d(R.nn.softplus(m), output_size=[4])
            f = R.nn.batch_flatten(s)
            R.output(f)
        return f
