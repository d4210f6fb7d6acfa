"""Staging memory in chunks against whole buffers: one NumPy AdamW step per chunk size.

    python benchmarks/h200/staging_chunks.py --out DIR [--sizes 24,26] [--chunks 0,4,8,16]

For each size (2^k fp32 elements, one param) and each case below, the median wall time of
``--repeats`` synchronous steps after ``--warmup``, with ``$VK_ADAM_STAGING_CHUNK_BYTES`` at each
of ``--chunks`` MiB (0: whole-buffer copies inside the step's submission):

- ``fresh``: a new gradient array each step (made outside the timed step, the previous one
  dropped inside it, as ``vk-adam bench --cases host`` does); the param through its import;
- ``fresh, device_params``: the same with ``device_params=True``;
- ``staging, reused`` / ``staging, fresh``: ``VK_ADAM_HOST_IMPORT=0`` (every array through
  staging memory: params and gradients up, params down).

Every case's params after the last step are compared with the whole-buffer run's, bit for bit.
Then the pieces of one buffer's trip through staging memory, each timed alone (``parts``).
Writes ``staging_chunks.json`` and prints a table. Runs on lavapipe too (``--sizes 20``).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import time
from pathlib import Path

import numpy as np

import vk_adam
from vk_adam._commands.bench.timing import median_ms, timeit
from vk_adam._runtime import copy_regions_op

CASES = {
    "fresh": {"fresh": True, "imports": True, "device_params": False},
    "fresh, device_params": {"fresh": True, "imports": True, "device_params": True},
    "staging, reused": {"fresh": False, "imports": False, "device_params": False},
    "staging, fresh": {"fresh": True, "imports": False, "device_params": False},
}


def run_case(n: int, case: dict, chunk_mib: int, repeats: int, warmup: int) -> tuple[float, np.ndarray]:
    os.environ["VK_ADAM_STAGING_CHUNK_BYTES"] = str(chunk_mib << 20)
    os.environ["VK_ADAM_HOST_IMPORT"] = "1" if case["imports"] else "0"
    rng = np.random.default_rng(0)
    param = rng.standard_normal(n, dtype=np.float32)
    reused = rng.standard_normal(n, dtype=np.float32) * 1e-2
    times = []
    with vk_adam.AdamW([param], lr=1e-3, device_params=case["device_params"]) as opt:
        grad = reused
        for i in range(warmup + repeats):
            nxt = reused.copy() if case["fresh"] else reused  # made outside the timed step
            t = time.perf_counter()
            grad = nxt  # the previous fresh array is dropped here, inside the step's time
            opt.step([grad])
            if i >= warmup:
                times.append(time.perf_counter() - t)
        opt.synchronize()
    del grad
    gc.collect()
    return 1e3 * statistics.median(times), param


def parts(n: int, repeats: int) -> dict[str, float]:
    """The pieces of one buffer's trip through staging memory at ``n`` fp32 elements, each alone
    (median ms): the threaded gather, the upload, both chunked, the download, the threaded
    scatter, and both chunked."""
    from vk_adam._optim.host import staging as sp
    from vk_adam._optim.host.copy_threads import copy_into
    from vk_adam._optim.layout import ParamSlot
    from vk_adam._runtime import host_view

    # the default chunk, or a quarter of the buffer where it holds fewer than two (small --sizes)
    os.environ["VK_ADAM_STAGING_CHUNK_BYTES"] = str(min(sp.DEFAULT_CHUNK_BYTES, n))
    out: dict[str, float] = {}
    array = np.random.default_rng(0).standard_normal(n, dtype=np.float32)
    with vk_adam.AdamW([np.zeros(n, np.float32)], lr=1e-3) as opt:
        internals = opt.internals()
        rt, tensor = internals.runtime, internals.groups[0].sets[0].grad
        staging = host_view(tensor)[:n]
        slots = [ParamSlot(0, 0, n, (n,), array)]
        ranges = sp.chunk_ranges(slots, 4)
        assert ranges is not None
        whole = [(0, 0, 4 * n)]

        def dma(to_device: bool) -> None:
            if to_device:
                op = copy_regions_op(tensor, tensor, whole, source_staging=True)
            else:
                op = copy_regions_op(tensor, tensor, whole, destination_staging=True)
            rt.submit([op]).wait()

        def up_chunked() -> None:
            for pending in sp.upload_in_chunks(rt, tensor, staging, slots, [array], ranges):
                pending.wait()

        cases = {
            "gather (threads)": lambda: copy_into(staging, array),
            "upload": lambda: dma(True),
            "gather + upload": lambda: (copy_into(staging, array), dma(True)),
            "gather + upload, chunked": up_chunked,
            "download": lambda: dma(False),
            "scatter (threads)": lambda: copy_into(array, staging),
            "download + scatter": lambda: (dma(False), copy_into(array, staging)),
            "download + scatter, chunked": lambda: sp.download_in_chunks(rt, tensor, staging, slots, ranges),
        }
        for name, fn in cases.items():
            out[name] = median_ms(timeit(fn, repeats, warmup=1))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--sizes", default="24,26", help="log2 of the element counts")
    ap.add_argument("--chunks", default="0,4,8,16", help="chunk sizes in MiB (0: whole buffers)")
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    chunks = [int(c) for c in args.chunks.split(",")]
    with vk_adam.open_device() as handle:
        device = handle.info.name
    rows = []
    print(f"{device}: AdamW step ms, one fp32 param; chunk MiB: {chunks}")
    for k in (int(s) for s in args.sizes.split(",")):
        for name, case in CASES.items():
            ms, params = [], []
            for chunk in chunks:
                t, p = run_case(1 << k, case, chunk, args.repeats, args.warmup)
                ms.append(t)
                params.append(p)
            same = all(p.tobytes() == params[0].tobytes() for p in params[1:])
            rows.append({"elements": 1 << k, "case": name, "chunks_mib": chunks, "ms": ms, "same_bits": same})
            cells = "  ".join(f"{c:>2} MiB {t:8.3f}" for c, t in zip(chunks, ms, strict=True))
            print(f"2^{k} {name:<22} {cells}  same bits: {same}", flush=True)
    pieces = {}
    for k in (int(s) for s in args.sizes.split(",")):
        pieces[1 << k] = parts(1 << k, args.repeats)
        cells = ", ".join(f"{name} {t:.3f}" for name, t in pieces[1 << k].items())
        print(f"2^{k} one buffer, ms: {cells}", flush=True)
    (args.out / "staging_chunks.json").write_text(
        json.dumps({"device": device, "rows": rows, "parts": pieces}, indent=1)
    )
    if not all(r["same_bits"] for r in rows):
        raise SystemExit("chunked and whole-buffer steps differ")


if __name__ == "__main__":
    main()
