"""ZeRO-1's parts that need no second process: the partition and the padded layout (pure), the
host staging against the mean it must produce, the stochastic-rounding stream of a window, the
device choice per rank, the collective agreement on errors, and the optimizer hooks a shard
uses (a window of a larger buffer, a host-set gradient scale) against one whole optimizer on
lavapipe. A one-rank torch.distributed group runs the wrapper itself in this process.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import vk_adam
from vk_adam import _formats as fmt
from vk_adam._errors import OptimizerClosedError
from vk_adam._optim.layout import ParamSlot, plan_flat
from vk_adam._optim.sharding import Window, shard_optimizer
from vk_adam.distributed._comm import agree, make_communicator
from vk_adam.distributed._shard import device_for_rank, local_rank, partition
from vk_adam.distributed._staging import ShardStaging

from ..conftest import gloo_world_of_one, limit_allocations, random_grad, scale_error


def _random_totals(rng: np.random.Generator, block: int) -> list[int]:
    return [int(k) * block for k in rng.integers(1, 40, size=rng.integers(1, 5))]


@pytest.mark.parametrize("block", [64, 256])
def test_shards_are_contiguous_whole_blocks_balanced_to_one_block(rng, block):
    for _ in range(200):
        totals, world = _random_totals(rng, block), int(rng.integers(1, 9))
        part = partition(totals, world, block)
        assert part.shards[0][0] == 0 and part.shards[-1][1] == sum(totals)
        sizes = [hi - lo for lo, hi in part.shards]
        assert all(a[1] == b[0] for a, b in zip(part.shards, part.shards[1:], strict=False))
        assert all(s % block == 0 for s in sizes) and max(sizes) - min(sizes) <= block
        # the pieces of every rank tile every group exactly once
        covered = [np.zeros(t, int) for t in totals]
        for rank in range(world):
            at = 0
            for piece in part.pieces(rank):
                assert piece.at == at and piece.lo % block == 0 and piece.hi % block == 0
                covered[piece.group][piece.lo : piece.hi] += 1
                at += piece.size
            assert at == sizes[rank]
        assert all(np.all(c == 1) for c in covered)


def test_segments_put_every_element_at_its_owner_in_the_padded_layout(rng):
    for _ in range(100):
        totals, world = _random_totals(rng, 64), int(rng.integers(1, 6))
        part = partition(totals, world, 64)
        seen = np.zeros(part.max_shard * world, int)
        for group, total in enumerate(totals):
            lo = int(rng.integers(0, total))
            hi = int(rng.integers(lo + 1, total + 1))
            got = 0
            for at, offset, count in part.segments(group, lo, hi):
                assert offset == got
                rank = at // part.max_shard
                s_lo, s_hi = part.shards[rank]
                first = part.starts[group] + lo + offset  # its flat index
                assert s_lo <= first and first + count <= s_hi and at - rank * part.max_shard == first - s_lo
                seen[at : at + count] += 1
                got += count
            assert got == hi - lo
        assert seen.max() <= 1


def test_partition_refuses_what_it_cannot_cut():
    with pytest.raises(ValueError, match="multiple of 64"):
        partition([100], 2, 64)
    with pytest.raises(ValueError, match="at least 1"):
        partition([64], 0, 64)


@pytest.mark.parametrize("dtypes", [["float32", "float32"], ["bfloat16", "float16"], ["float32", "bfloat16"]])
def test_host_staging_gives_each_rank_the_mean_and_every_rank_the_params(rng, dtypes):
    """The collectives simulated in this process: each rank's staged gradients summed shard by
    shard equal the mean of the whole gradients; every rank's pieces, gathered, are the params."""
    world = 3
    shapes = [[(33, 7), (130,)], [(5, 4, 3), (300,), (1,)]]
    names = dict(zip(range(2), dtypes, strict=True))
    params = [
        [rng.standard_normal(s).astype(fmt.NUMPY_DTYPES[names[g]]) for s in group]
        for g, group in enumerate(shapes)
    ]
    slots, totals = [], []
    for group in params:
        group_slots, total = plan_flat(group, 2**30)
        slots.append(group_slots)
        totals.append(total)
    part = partition(totals, world, 64)
    copies = [[[p.copy() for p in group] for group in params] for _ in range(world)]
    staging = []
    for rank in range(world):
        rank_slots = [
            [ParamSlot(0, s.offset, s.size, s.shape, copies[rank][g][i]) for i, s in enumerate(gs)]
            for g, gs in enumerate(slots)
        ]
        staging.append(ShardStaging(part, rank, rank_slots, dtypes))
    grads = [
        [
            [rng.standard_normal(s).astype(p.dtype) for s, p in zip(group, pg, strict=True)]
            for group, pg in zip(shapes, params, strict=True)
        ]
        for _ in range(world)
    ]
    for rank in range(world):
        staging[rank].stage_grads(grads[rank])
    for rank in range(world):  # reduce-scatter, then the mean
        n = part.max_shard
        staging[rank].grad_recv[:] = np.sum([s.grad_send[rank * n : (rank + 1) * n] for s in staging], axis=0)
        np.divide(staging[rank].grad_recv, np.float32(world), out=staging[rank].grad_recv)
    for rank in range(world):
        for piece, grad in zip(staging[rank].pieces, staging[rank].shard_grads(), strict=True):
            whole = np.zeros(totals[piece.group])
            for slot, g in zip(
                slots[piece.group], zip(*[gr[piece.group] for gr in grads], strict=True), strict=True
            ):
                whole[slot.offset : slot.offset + slot.size] = np.mean(
                    [x.astype(np.float64) for x in g], axis=0
                ).reshape(-1)
            expected = whole[piece.lo : piece.hi]
            assert grad.dtype == fmt.NUMPY_DTYPES[dtypes[piece.group]]
            tol = 1e-6 if grad.dtype == np.float32 else 2.0**-7
            assert np.all(
                np.abs(grad.astype(np.float64) - expected) <= tol * np.max(np.abs(expected)) + 1e-30
            )
    for rank in range(world):  # each rank's pieces are its params; "update" them
        staging[rank].refresh_pieces()
        for array in staging[rank].piece_params:
            array[...] = (array.astype(np.float64) + 1.0).astype(array.dtype)
        staging[rank].fill_param_send()
    gathered = np.concatenate([s.param_send for s in staging])
    for rank in range(world):  # all-gather
        staging[rank].param_recv[:] = gathered
        staging[rank].scatter_params()
        for group, original in zip(copies[rank], params, strict=True):
            for got, p in zip(group, original, strict=True):
                assert got.tobytes() == (p.astype(np.float64) + 1.0).astype(p.dtype).tobytes()


def test_a_window_key_continues_the_whole_buffers_stream(rng):
    for _ in range(20):
        key, offset = int(rng.integers(0, 2**32)), 2 * int(rng.integers(0, 2**23))
        whole = fmt.random_bits(key, offset + 300)
        assert np.array_equal(fmt.random_bits(fmt.offset_key(key, offset), 300), whole[offset:])
    with pytest.raises(ValueError, match="must be even"):
        fmt.offset_key(1, 3)  # two elements share one hash: an odd offset would split a pair


def test_device_choice_per_rank():
    assert local_rank({"LOCAL_RANK": "3"}) == 3
    assert local_rank({"OMPI_COMM_WORLD_LOCAL_RANK": "1"}) == 1
    assert local_rank({"LOCAL_RANK": "2", "OMPI_COMM_WORLD_LOCAL_RANK": "1"}) == 2
    assert local_rank({}) is None
    assert device_for_rank(0, [1, 2], None) == 1 and device_for_rank(3, [1, 2], None) == 2  # round robin
    assert device_for_rank(1, [1, 2], "0") is None  # $VK_ADAM_DEVICE wins (the usual choice reads it)
    assert device_for_rank(1, [0], None) is None and device_for_rank(1, [], None) is None  # one GPU: shared


def test_window_optimizers_step_as_their_slices_of_one_whole_optimizer(rng):
    """bf16 params with stochastic rounding and 8-bit state, the whole buffer 6,144 elements
    (8-bit) and one slice 2,560 (under the 4,096 threshold alone): bit for bit."""
    p = (rng.standard_normal(6000) * 2).astype(ml_dtypes.bfloat16)
    options = {"lr": 1e-2, "state_dtype": "int8-blockwise", "stochastic_rounding": True, "seed": 3}
    whole_param = p.copy()
    cuts = [(0, 2560), (2560, 6144)]
    padded = np.zeros(6144, p.dtype)
    padded[:6000] = p
    slices = [padded[a:b].copy() for a, b in cuts]
    whole = vk_adam.create("adamw", [whole_param], **options)
    windows = [
        shard_optimizer([s], "adamw", [Window(0, a, 6144)], **options)
        for s, (a, _) in zip(slices, cuts, strict=True)
    ]
    for _ in range(3):
        g = random_grad(rng, (6000,)).astype(ml_dtypes.bfloat16)
        whole.step([g])
        gp = np.zeros(6144, g.dtype)
        gp[:6000] = g
        for opt, (a, b) in zip(windows, cuts, strict=True):
            opt.step([gp[a:b]])
    joined = np.concatenate(slices)[:6000]
    assert joined.tobytes() == whole_param.tobytes()
    full = whole.state_dict()["state"][0]
    parts = [w.state_dict()["state"][0] for w in windows]
    for key in ("exp_avg", "exp_avg_sq"):
        assert np.concatenate([x[key] for x in parts])[:6000].tobytes() == full[key].tobytes()
        assert (
            np.concatenate([x[key + ".absmax"] for x in parts]).tobytes() == full[key + ".absmax"].tobytes()
        )
    for opt in (whole, *windows):
        opt.close()


def test_a_host_gradient_scale_is_devices_clipping(rng):
    params = [rng.standard_normal((300, 7)).astype(np.float32) for _ in range(2)]
    clipped, scaled = [p.copy() for p in params], [p.copy() for p in params]
    with vk_adam.AdamW(clipped, lr=1e-2, clip_grad_norm=1.0) as a, vk_adam.AdamW(scaled, lr=1e-2) as b:
        with pytest.raises(ValueError, match="takes no scale"):
            a.internals().set_grad_scale(0.5)
        for _ in range(3):
            grads = [random_grad(rng, (300, 7)) * 100 for _ in params]
            a.step(grads)
            norm = np.float32(a.last_grad_norm())
            b.internals().set_grad_scale(min(1.0, float(np.float32(1.0) / (norm + np.float32(1e-6)))))
            b.step(grads)
            with pytest.raises(ValueError, match="synchronous"):
                b.step(grads, wait=False)
        for x, y in zip(clipped, scaled, strict=True):
            assert scale_error(y, x) <= 1e-6


class _OneRank:
    rank, size, local_rank, staging_seconds = 0, 1, 0, 0.0

    def all_reduce_sum(self, values):
        return np.array(values, np.float64)

    def all_gather_object(self, obj):
        return [obj]


def test_agree_raises_the_failing_ranks_error_with_its_type():
    agree(_OneRank(), None, "step()")  # nothing failed: returns
    with pytest.raises(ValueError, match=r"step\(\) on rank 0 of 1: grad for param 0 has shape"):
        agree(_OneRank(), ValueError("grad for param 0 has shape (3,)"), "step()")
    with pytest.raises(TypeError, match="rank 0 of 1: bad kind"):
        agree(_OneRank(), TypeError("bad kind"), "step()")
    with pytest.raises(OptimizerClosedError):
        agree(_OneRank(), OptimizerClosedError("closed"), "step()")
    with pytest.raises(RuntimeError, match="boom"):
        agree(_OneRank(), KeyError("boom"), "step()")


def test_communicator_arguments_are_checked():
    with pytest.raises(TypeError, match="not both"):
        make_communicator(object(), object())
    with pytest.raises(TypeError, match="mpi4py communicator"):
        make_communicator(object(), None)


def test_importing_vk_adam_distributed_imports_neither_torch_nor_mpi4py():
    code = "import sys, vk_adam, vk_adam.distributed; print('torch' in sys.modules, 'mpi4py' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


# -- the wrapper itself in a one-rank torch.distributed group (this process) ----------------------


@pytest.fixture(scope="module")
def one_rank_group():
    pytest.importorskip("torch")
    import torch.distributed as dist

    if dist.is_initialized():
        pytest.skip("a process group is already initialized in this process")
    with pytest.raises(RuntimeError, match="not initialized"):
        make_communicator(None, None)
    with gloo_world_of_one():
        yield


def test_one_rank_is_one_process_bit_for_bit(rng, one_rank_group):
    import vk_adam.distributed as vkd

    shapes = [(33, 7), (4099,)]
    params = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    mine, theirs = [p.copy() for p in params], [p.copy() for p in params]
    opt = vkd.ZeroRedundancyOptimizer(mine, "adamw", lr=1e-2, state_dtype="bfloat16")
    ref = vk_adam.AdamW(theirs, lr=1e-2, state_dtype="bfloat16")
    assert opt.shard == (0, 256 + 4160) and "gloo" in opt.communicator and "rank 0 of 1" in repr(opt)
    assert opt.memory_bytes() == ref.memory_bytes()
    for _ in range(2):
        grads = [random_grad(rng, s) for s in shapes]
        opt.step(grads)
        ref.step(grads)
    assert all(a.tobytes() == b.tobytes() for a, b in zip(mine, theirs, strict=True))
    with pytest.raises(RuntimeError, match="consolidate_state_dict"):
        opt.state_dict()
    with pytest.raises(ValueError, match="to must be a rank"):
        opt.consolidate_state_dict(to=1)
    opt.consolidate_state_dict()
    sd, expected = opt.state_dict(), ref.state_dict()
    assert sd["param_groups"] == expected["param_groups"]
    for i, entry in expected["state"].items():
        assert all(
            np.asarray(sd["state"][i][k]).tobytes() == np.asarray(v).tobytes() for k, v in entry.items()
        )
    with pytest.raises(ValueError, match="lacks 'exp_avg'"):  # one process's check and message
        opt.load_state_dict({**sd, "state": {0: {"step": 2.0}, 1: sd["state"][1]}})
    opt.load_state_dict(sd)
    with pytest.raises(ValueError, match=r"pass the kp\.Manager that created them as manager="):
        vkd.ZeroRedundancyOptimizer([ref.param_buffer()], "adamw")
    with pytest.raises(ValueError, match="Invalid learning rate"):
        vkd.ZeroRedundancyOptimizer([params[0]], "adamw", lr=-1.0)
    opt.close()
    ref.close()
    with pytest.raises(OptimizerClosedError):
        opt.step(grads)


def test_a_shard_through_chunked_staging_is_one_process_bit_for_bit(rng, one_rank_group, monkeypatch):
    """A shard's NumPy pieces go through staging memory in chunks (``host.staging``, 64 KiB
    chunks here; every array through staging): the params are one process's with whole buffers."""
    import vk_adam.distributed as vkd
    from vk_adam._optim.host import imports as host_imports
    from vk_adam._optim.host import to_device
    from vk_adam._optim.host.staging import STAGING_CHUNK_ENV

    chunked = []
    upload = to_device.upload_in_chunks
    monkeypatch.setattr(to_device, "upload_in_chunks", lambda *a: chunked.append(1) or upload(*a))
    monkeypatch.setenv(host_imports.HOST_IMPORT_ENV, "0")
    shapes = [(300, 257), (40_001,)]
    params = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    steps = [[random_grad(rng, s) for s in shapes] for _ in range(3)]
    mine, theirs = [p.copy() for p in params], [p.copy() for p in params]
    monkeypatch.setenv(STAGING_CHUNK_ENV, str(64 * 1024))
    with vkd.ZeroRedundancyOptimizer(mine, "adamw", lr=1e-2) as opt:
        for grads in steps:
            opt.step(grads)
    assert chunked  # the shard's update took the chunked path
    monkeypatch.setenv(STAGING_CHUNK_ENV, "0")
    with vk_adam.AdamW(theirs, lr=1e-2) as ref:
        for grads in steps:
            ref.step(grads)
    assert all(a.tobytes() == b.tobytes() for a, b in zip(mine, theirs, strict=True))


@pytest.mark.parametrize("paired", [False, True])
@pytest.mark.parametrize("message", [1 << 20, 997])
@pytest.mark.parametrize("mean", [False, True])
@pytest.mark.parametrize("size", [1, 2, 3, 4])
def test_the_exchange_reduce_scatter_sums_in_rank_order_on_any_schedule(rng, size, mean, message, paired):
    """Each rank's part of the sum, added in rank order whatever order the messages arrive in
    (ranks as threads, messages as queues; rank ``r``'s first post held back by ``r`` sleeps);
    with ``mean``, then divided by the rank count, bit for bit as a division after the sum. In
    one message, and in 71 (each landing buffer taken again many times while others are added);
    every send posted first (gloo's schedule), or one send and one receive at a time (MPI's)."""
    import queue
    import threading
    import time

    from vk_adam.distributed._exchange import ExchangeReduceScatter

    n = 70_001  # more than one chunk of the fused division, and not a multiple of one
    sends = [
        (rng.standard_normal(size * n) * 10.0 ** rng.integers(-3, 4, size * n)).astype(np.float32)
        for _ in range(size)
    ]
    boxes = {(a, b): queue.Queue() for a in range(size) for b in range(size)}
    recvs = [np.full(n, np.nan, np.float32) for _ in range(size)]

    class Done:
        def wait(self) -> None:
            pass

    posts = {}

    def rank(r: int) -> None:
        posted = posts[r] = []

        def post(part, peer):
            if not posted:
                time.sleep(0.01 * (size - r))  # later ranks' parts arrive first
            posted.append(peer)
            boxes[(r, peer)].put(part.copy())
            return Done()

        def take(into, peer):
            into[...] = boxes[(peer, r)].get(timeout=10)

        def swap(part, to, into, source):
            post(part, to)
            take(into, source)

        exchange = ExchangeReduceScatter(message)
        for _ in range(2):  # the second call reuses the first one's buffers and thread
            recvs[r][...] = np.nan
            schedule = {"swap": swap} if paired else {"post": post, "take": take}
            exchange(sends[r], recvs[r], r, size, mean=mean, **schedule)
        exchange.close()

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(size)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for r in range(size):
        assert len(posts[r]) == 2 * (size - 1) * -(-n // message)  # every part, in messages
    for wrong in ({"post": print, "swap": print}, {"post": print}, {}):
        with pytest.raises(TypeError, match="post= and take=, or swap="):
            ExchangeReduceScatter()(sends[0], recvs[0], 0, size, **wrong)
        expected = sends[0][r * n : r * n + n].copy()
        for s in range(1, size):
            expected += sends[s][r * n : r * n + n]
        if mean:
            expected /= np.float32(size)
        assert recvs[r].tobytes() == expected.tobytes()
        exact = sum(s[r * n : r * n + n].astype(np.float64) for s in sends) / (size if mean else 1)
        np.testing.assert_allclose(recvs[r], exact, rtol=1e-5 * size, atol=1e-5 * np.abs(exact).max())


@pytest.mark.exclusive  # needs the machine to itself (scripts/test.sh runs it alone)
@pytest.mark.slow  # multi-process
@pytest.mark.parametrize("world", [2, 3])
@pytest.mark.parametrize("launcher", ["torch", "mpi"])
def test_the_exchange_over_gloo_and_mpi_in_many_messages_sums_in_rank_order(tmp_path, launcher, world):
    """The communicators' own exchange (gloo: every isend, then recv; MPI: Sendrecv) in 71
    messages per part: each rank's mean is its parts' float32 sum in rank order, divided by
    the rank count, bit for bit."""
    from . import exchange_worker as worker
    from .test_zero1 import _env, _free_port

    if launcher == "mpi" and shutil.which("mpirun") is None:
        pytest.skip("mpirun is not installed")
    script = [str(Path(worker.__file__).resolve()), launcher, str(tmp_path)]
    if launcher == "torch":
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(world)]
        cmd += ["--master_addr", "127.0.0.1", "--master_port", str(_free_port()), *script]
    else:
        cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-n", str(world), sys.executable, *script]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=_env(), check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    sends = [worker.sends(r, world) for r in range(world)]
    n = worker.N
    for r in range(world):
        expected = sends[0][r * n : r * n + n].copy()
        for s in sends[1:]:
            expected += s[r * n : r * n + n]
        expected /= np.float32(world)
        assert np.load(tmp_path / f"rank{r}.npy").tobytes() == expected.tobytes()


@pytest.mark.parametrize(
    "dtype,options",
    [
        (np.float32, {"state_dtype": "int8-blockwise"}),
        (ml_dtypes.bfloat16, {"state_dtype": "float32", "stochastic_rounding": True}),
    ],
    ids=["fp32-int8", "bf16-stochastic"],
)
def test_a_shard_larger_than_one_allocation_steps_in_pieces(rng, one_rank_group, monkeypatch, dtype, options):
    """A shard past ``maxMemoryAllocationSize`` (here lowered to 256 KiB or 1 MiB) is cut into pieces, one
    buffer set each, each a window of the shard from its first element: bit for bit what one
    process steps with the whole group in one buffer set, stochastic rounding's stream included."""
    import vk_adam.distributed as vkd

    # 154,099 elements: three pieces of at most 65,536 (256 KiB allocations); with 8-bit state,
    # whose quantization tables take 514 KiB, four times as many under 1 MiB allocations
    scale = 4 if options.get("state_dtype") == "int8-blockwise" else 1
    shapes = [(300 * scale, 500), (4099 * scale,)]
    params = [(rng.standard_normal(s) * 0.5).astype(dtype) for s in shapes]
    mine, theirs = [p.copy() for p in params], [p.copy() for p in params]
    ref = vk_adam.AdamW(theirs, lr=1e-2, **options)
    limit_allocations(monkeypatch, scale << 18)
    opt = vkd.ZeroRedundancyOptimizer(mine, "adamw", lr=1e-2, **options)
    assert len(ref._groups[0].sets) == 1 and len(opt._inner._groups[0].sets) == 3
    for _ in range(3):
        grads = [random_grad(rng, s).astype(dtype) for s in shapes]
        opt.step(grads)
        ref.step(grads)
    assert all(a.tobytes() == b.tobytes() for a, b in zip(mine, theirs, strict=True))
    opt.consolidate_state_dict()
    sd, expected = opt.state_dict(), ref.state_dict()
    for i, entry in expected["state"].items():
        assert all(
            np.asarray(sd["state"][i][k]).tobytes() == np.asarray(v).tobytes() for k, v in entry.items()
        ), i
    opt.load_state_dict(sd)  # back into the pieces, then one more step each
    grads = [random_grad(rng, s).astype(dtype) for s in shapes]
    opt.step(grads)
    ref.step(grads)
    assert all(a.tobytes() == b.tobytes() for a, b in zip(mine, theirs, strict=True))
    opt.close()
    ref.close()
