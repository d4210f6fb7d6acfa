"""Where a NumPy step's time goes on a GPU: the pieces of the host path, each timed alone.

    python benchmarks/h200/host_paths.py --out DIR [--sizes 24,26] [--quick]

- ``import_ms``: importing (pinning) a fresh array's pages (``VK_EXT_external_memory_host``), and
  dropping the import;
- ``copyto_GBps``: ``np.copyto`` of a fresh pageable array into a buffer's staging memory, with
  1, 4, 8 and 16 threads (NumPy releases the GIL while it copies);
- ``copies_ms``: one host -> device copy, one device -> host copy, both in one command buffer
  with no barrier between (do they overlap?), and both with a barrier between;
- ``steps_ms``: ``AdamW.step([g])`` on one fp32 param, default (the update binds the param's
  import), ``copies`` (region copies in and out around the update instead) and
  ``device_params=True``, gradients reused and fresh, with ``profile=True``'s GPU span beside the
  wall time.

Writes ``host_paths.json``. Runs on lavapipe too (small sizes) so the script itself is checked.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

import vk_adam
from vk_adam._runtime import copy_regions_op, host_view, import_host_range


def median_ms(times: list[float]) -> float:
    return 1e3 * statistics.median(times)


def timed(fn, repeats: int, warmup: int = 1) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return median_ms(times)


def threaded_copy(dst: np.ndarray, src: np.ndarray, pool: ThreadPoolExecutor | None, threads: int) -> None:
    if pool is None or threads == 1:
        np.copyto(dst, src)
        return
    step = -(-src.size // threads)
    list(pool.map(lambda i: np.copyto(dst[i : i + step], src[i : i + step]), range(0, src.size, step)))


def pieces(n: int, repeats: int) -> dict:
    out: dict = {}
    with vk_adam.AdamW([np.zeros(n, np.float32)], lr=1e-3) as opt:
        internals = opt.internals()
        rt, imports = internals.runtime, internals.host_traffic.imports
        bset = internals.groups[0].sets[0]
        staging = host_view(bset.grad)[:n]

        def fresh_import() -> None:
            a = np.empty(n, np.float32)
            a.fill(1.0)  # touched, as a gradient array is when the step gets it
            t = time.perf_counter()
            entry = imports.get(a, at_first_sight=True)
            pin.append(time.perf_counter() - t)
            t = time.perf_counter()
            del a, entry  # the weak reference drops the import
            drop.append(time.perf_counter() - t)

        pin: list[float] = []
        drop: list[float] = []
        for _ in range(repeats):
            fresh_import()
        out["import_ms"] = {
            "pin": median_ms(pin),
            "drop": median_ms(drop),
            "imports_enabled": imports.enabled,
        }
        out["copyto_GBps"] = {}
        for threads in (1, 4, 8, 16):
            with ThreadPoolExecutor(threads) as pool:
                times = []
                for _ in range(repeats):
                    src = np.empty(n, np.float32)
                    src.fill(2.0)
                    t = time.perf_counter()
                    threaded_copy(staging, src, pool, threads)
                    times.append(time.perf_counter() - t)
                out["copyto_GBps"][threads] = 4 * n / statistics.median(times) / 1e9
        # copies between two imported arrays and the set's device buffers
        if imports.enabled:
            a = np.ones(n, np.float32)
            b = np.zeros(n, np.float32)
            (ta, oa), (tb, ob) = (
                import_host_range(
                    rt.manager,
                    int(x.__array_interface__["data"][0]),
                    x.nbytes,
                    rt.facts.info.host_import_alignment,
                )
                for x in (a, b)
            )
            up = copy_regions_op(ta, bset.grad, [(oa, 0, 4 * n)])
            down = copy_regions_op(bset.param, tb, [(0, ob, 4 * n)])
            barrier = rt.barrier_op([bset.grad, bset.param])
            out["copies_ms"] = {
                "up": timed(lambda: rt.run([up]), repeats),
                "down": timed(lambda: rt.run([down]), repeats),
                "up+down, no barrier": timed(lambda: rt.run([up, down]), repeats),
                "up, barrier, down": timed(lambda: rt.run([up, barrier, down]), repeats),
            }
            del up, down
            for t in (ta, tb):
                t.destroy()
    return out


def steps(n: int, repeats: int) -> dict:
    out: dict = {}
    rng = np.random.default_rng(0)
    for mode in ("default", "copies", "device_params"):
        for arrays in ("reused", "fresh"):
            p = rng.standard_normal(n, dtype=np.float32)
            g = rng.standard_normal(n, dtype=np.float32)
            with vk_adam.AdamW([p], lr=1e-3, profile=True, device_params=mode == "device_params") as opt:
                if mode == "copies":  # region copies around the update, not the bound import
                    opt.internals().host_traffic.stop_direct()
                wall, gpu = [], []
                for i in range(repeats + 3):
                    if arrays == "fresh":
                        g = np.empty(n, np.float32)
                        g.fill(0.5)
                    t = time.perf_counter()
                    opt.step([g])
                    if i >= 3:
                        wall.append(time.perf_counter() - t)
                        gpu.append(opt.last_gpu_seconds or 0.0)
                key = f"{mode} {arrays}"
                out[key] = {"wall": median_ms(wall), "gpu": median_ms(gpu)}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="20,24,26", help="log2 of the element counts")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--out", type=Path, default=Path("."))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    result: dict = {}
    for k in (int(s) for s in args.sizes.split(",")):
        n = 1 << k
        result[f"2^{k}"] = {**pieces(n, args.repeats), "steps_ms": steps(n, args.repeats)}
        print(f"2^{k}", json.dumps(result[f"2^{k}"], indent=1), flush=True)
    (args.out / "host_paths.json").write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
