"""The data_parallel pass and DataParallelTrainer: a step over W processes equals the one-process step
on the whole batch; the pass output prints, re-parses and TVM reads it; a lone process runs it as is."""

from __future__ import annotations

import numpy as np
import pytest
from optional import need

from distributed import workers as W

import retrograd
from retrograd.distributed import DataParallelTrainer, data_parallel
from retrograd.distributed.data_parallel import plan_buckets
from retrograd.errors import TrainingError
from retrograd.ir.structural import structural_equal
from retrograd.ir.well_formed import well_formed
from retrograd.training import Adam, CrossEntropyLoss, SGD, Trainer, setup_trainer

TOL = {"float64": 1e-12, "float32": 1e-5}


def _single_process(model: str, dtype: str):
    mod, batches = W.train_setup(model, dtype)
    t = Trainer(mod)
    t.init_params(seed=0)
    losses = [t.step(*b) for b in batches]
    return t.params, np.array(losses)


@pytest.mark.parametrize("workers", [2, 3])
def test_data_parallel_steps_equal_the_whole_batch_step(workers, tmp_path):
    need("torch")
    codes, errs, _ = W.spawn("train", workers, tmp_path, timeout=300)
    assert codes == [0] * workers, errs
    got = [np.load(tmp_path / f"rank{r}.npz") for r in range(workers)]
    for model, dtype in W.CONFIGS:
        params, losses = _single_process(model, dtype)
        tol = TOL[dtype]
        for r in range(workers):
            np.testing.assert_allclose(got[r][f"{model}_{dtype}_losses"], losses, rtol=tol, atol=tol,
                                       err_msg=f"{model} {dtype} losses, worker {r}")
            for name, want in params.items():
                np.testing.assert_allclose(got[r][f"{model}_{dtype}_{name}"], want, rtol=tol, atol=tol,
                                           err_msg=f"{model} {dtype} {name}, worker {r}")
        assert losses[-1] < losses[0]  # it trained: the comparison is not of untouched parameters


def test_buffers_follow_pytorch_ddp_broadcast_from_worker0(tmp_path):
    """An imported model with BatchNorm on 2 workers, different shards: parameters, running statistics
    and num_batches_tracked of every worker equal those of PyTorch's DistributedDataParallel (its default
    broadcast_buffers=True) after the same steps, run in the same processes."""
    need("torch")
    codes, errs, _ = W.spawn("train_buffers", 2, tmp_path, timeout=300)
    assert codes == [0, 0], errs
    got = [np.load(tmp_path / f"rank{r}.npz") for r in range(2)]
    keys = [k[len("ddp/"):] for k in got[0].files if k.startswith("ddp/")]
    assert {k for k in keys if "running" in k or "num_batches" in k} == {
        f"{i}.{b}" for i in (1, 4) for b in ("running_mean", "running_var", "num_batches_tracked")}
    for r in range(2):
        # The DataParallelTrainer's loss is the global batch's: the mean of DDP's per-shard losses.
        np.testing.assert_allclose(got[r]["ours_losses"], (got[0]["ddp_losses"] + got[1]["ddp_losses"]) / 2, rtol=1e-12)
        for k in keys:
            ours, ddp = got[r][f"ours/{k}"], got[r][f"ddp/{k}"]
            assert ours.dtype == ddp.dtype, k
            if k.endswith("num_batches_tracked"):
                assert int(ours) == int(ddp) == 3 + W.BN_STEPS, k
            else:
                np.testing.assert_allclose(ours, ddp, rtol=1e-11, atol=1e-13, err_msg=f"{k}, worker {r}")
    # Not vacuous: the shards differ, so the workers' last updates of the statistics do too, and training moved them.
    assert not np.allclose(got[0]["ddp/1.running_mean"], got[1]["ddp/1.running_mean"])
    start = W.bn_net(need("torch")).state_dict()
    for k in ("1.running_mean", "4.running_var"):
        assert not np.allclose(got[0][f"ours/{k}"], start[k].numpy()), k


def test_a_lone_process_runs_the_data_parallel_step_as_the_plain_step():
    """Without a process group the collectives are a group of one's: the same values as Trainer's."""
    for model, dtype in W.CONFIGS[:3]:
        params, losses = _single_process(model, dtype)
        mod, batches = W.train_setup(model, dtype)
        t = DataParallelTrainer(mod, bucket=W.BUCKET)
        t.init_params(seed=0)
        got = np.array([t.step(*b) for b in batches])
        np.testing.assert_array_equal(got, losses)
        for name in params:
            np.testing.assert_array_equal(t.params[name], params[name])
        assert not np.allclose(losses[0], losses[-1])  # it trained


def _mlp_module(opt=None):
    return setup_trainer(retrograd.parse(W.MLP), CrossEntropyLoss(), opt or Adam(1e-2))


def _ccl_calls(func):
    from retrograd.ir.expr import Call

    out = []
    for block in func.body.blocks:
        for b in block.bindings:
            if isinstance(b.value, Call) and getattr(b.value.op, "name", "").startswith("relax.ccl."):
                out.append((b.var.name_hint, b.value))
    return out


def test_pass_prints_reparses_and_tvm_reads_it():
    mod = data_parallel(_mlp_module(), bucket=300)
    assert well_formed(mod) == []
    text = mod.script()
    assert 'R.ccl.allreduce(bucket, op_type="avg", in_group=True)' in text
    assert "R.ccl.broadcast_from_worker0(w1)" in text
    again = retrograd.parse(text)
    assert structural_equal(again, mod)
    tvm = need("tvm")
    from retrograd.frontend.tvm_export import to_tvm

    tmod = to_tvm(mod)
    tvm_text = tmod.script()
    assert tvm_text.count("R.ccl.allreduce(") == text.count("R.ccl.allreduce(")
    assert isinstance(tmod, tvm.ir.IRModule)


def test_buckets_hold_at_most_the_cap_and_follow_the_backward():
    mod = _mlp_module()
    sizes = {"w1": 6 * 16 * 4, "b1": 16 * 4, "w2": 16 * 4 * 4, "b2": 4 * 4}
    for cap, expected in [(0, 4), (300, 3), (10**9, 1)]:
        step = data_parallel(mod, bucket=cap)["train_step"]
        calls = [c for _, c in _ccl_calls(step) if c.op.name == "relax.ccl.allreduce"]
        assert len(calls) == expected, cap
        total = sum(int(np.prod(c.struct_info.shape)) * 4 for c in calls)
        assert total == sum(sizes.values())  # every gradient byte travels once, nothing else
        for c in calls:
            nbytes = int(np.prod(c.struct_info.shape)) * 4
            assert nbytes <= max(cap, max(sizes.values()))
    # each allreduce comes right after the binding computing its bucket's last gradient
    step = data_parallel(mod, bucket=0)["train_step"]
    names = [b.var.name_hint for blk in step.body.blocks for b in blk.bindings]
    for p in sizes:
        i = names.index(f"{p}_grad_avg")
        assert names[i - 1] == f"{p}_adjoint_out"
    # the last layer's gradients are ready first: b2 / w2 before w1
    assert names.index("b2_grad_avg") < names.index("w1_grad_avg")


def test_plan_buckets_greedy_by_readiness():
    from retrograd.ir.block import VarBinding
    from retrograd.ir.expr import Var
    from retrograd.ir.struct_info import TensorStructInfo

    gs = [Var(f"g{i}", TensorStructInfo((n,), "float32")) for i, n in enumerate([10, 20, 30, 40])]
    bindings = [VarBinding(g, None) for g in reversed(gs)]  # g3 is computed first
    plan = plan_buckets(gs, bindings, 200)
    assert plan == [([3], 0), ([2, 1], 2), ([0], 3)]


def test_data_parallel_errors():
    mod = _mlp_module()
    with pytest.raises(TrainingError, match="no function 'nope'"):
        data_parallel(mod, func="nope")
    with pytest.raises(TrainingError, match="bucket"):
        data_parallel(mod, bucket="lots")
    with pytest.raises(TrainingError, match="bucket"):
        data_parallel(mod, bucket=-1)
    with pytest.raises(TrainingError, match="layout attributes"):
        data_parallel(mod, func="backbone")
    sparse = setup_trainer(retrograd.parse(W.MLP), CrossEntropyLoss(), SGD(0.1))
    assert "train_step" in data_parallel(sparse, bucket="1KiB")


def test_pipeline_spelling_and_cli(tmp_path, capsys):
    from retrograd.cli.app import main
    from retrograd.passes import parse_pipeline

    mod = _mlp_module()
    direct = data_parallel(mod, bucket=300)
    via = parse_pipeline("data-parallel(func=train_step, bucket=300)")(mod)
    assert structural_equal(via, direct)
    src = tmp_path / "step.py"
    src.write_text(mod.script())
    assert main(["opt", str(src), "-p", "data-parallel(bucket=25MiB)"]) == 0
    out = capsys.readouterr().out
    assert out.count('R.ccl.allreduce(bucket, op_type="avg", in_group=True)') == 1  # one bucket holds all
    assert out.count("R.ccl.broadcast_from_worker0(") == 4
