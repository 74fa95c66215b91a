"""A worker that dies or stops answering makes the others fail with a clear error within the timeout."""

from __future__ import annotations

import pytest
from optional import need

from distributed import workers as W

import retrograd.distributed as rd
from retrograd.errors import UsageError


@pytest.mark.parametrize("task", ["die", "hang"])
def test_lost_worker_stops_the_others_within_the_timeout(task, tmp_path):
    need("torch")
    collective_timeout = 5.0
    codes, errs, seconds = W.spawn(task, 2, tmp_path, timeout=90, collective_timeout=collective_timeout, wait_for=0)
    assert codes[0] == 1, errs[0]
    assert "R.ccl.allreduce failed on worker 0 of 2" in errs[0], errs[0]
    assert "Traceback" not in errs[0]
    # start-up (imports, rendezvous) plus at most the collective timeout, never a hang
    assert seconds < 60 + collective_timeout


def test_group_of_one_outside_a_process_group(monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert rd.init() is False
    assert (rd.rank(), rd.world_size(), rd.is_initialized()) == (0, 1, False)
    rd.barrier()  # nothing to wait for


def test_init_names_what_is_missing(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.delenv("MASTER_PORT", raising=False)
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    with pytest.raises(UsageError, match="MASTER_PORT"):
        rd.init()
    monkeypatch.setenv("MASTER_PORT", "1")
    monkeypatch.setenv("RANK", "2")
    with pytest.raises(UsageError, match=r"RANK=2 is not in \[0, WORLD_SIZE=2\)"):
        rd.init()


def test_backend_fits_the_device():
    assert rd.backend_for("cpu") == "gloo"
    assert rd.backend_for("cuda") == "nccl"
    assert rd.backend_for("cuda:1") == "nccl"
    with pytest.raises(UsageError, match="no process-group backend"):
        rd.backend_for("tpu")


def test_torch_device_picks_nccl():
    torch = need("torch")
    assert rd.backend_for(torch.device("cuda", 0)) == "nccl"
    assert rd.backend_for(torch.device("cpu")) == "gloo"
