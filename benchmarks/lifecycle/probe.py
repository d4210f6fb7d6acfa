"""Vulkan device lifecycle probes: raw kp.Manager churn and vk-adam optimizer lifecycles.

Each probe runs in a child process (an abort inside the driver kills only the child), prints one
JSON line per sample, and the parent writes everything to --out as JSON lines.

    python benchmarks/lifecycle/probe.py manager-cycles --n 1000
    python benchmarks/lifecycle/probe.py managers-alive --n 200
    python benchmarks/lifecycle/probe.py optimizer-cycles --n 10000
    python benchmarks/lifecycle/probe.py optimizers-alive --n 1000
    python benchmarks/lifecycle/probe.py construction --n 50

Sampled per step: RSS and virtual size (MiB), open file descriptors, threads and memory maps of
the process (what a leaked VkDevice or VkInstance grows), and the seconds the step took.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Any


def _proc() -> dict[str, float]:
    fields: dict[str, float] = {}
    with open("/proc/self/status") as status:
        for line in status:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmSize", "Threads"):
                fields[key] = float(value.split()[0])
    with open("/proc/self/maps") as maps:
        n_maps = sum(1 for _ in maps)
    return {
        "rss_mib": round(fields["VmRSS"] / 1024, 1),
        "vm_mib": round(fields["VmSize"] / 1024, 1),
        "fds": len(os.listdir("/proc/self/fd")),
        "threads": int(fields["Threads"]),
        "maps": n_maps,
    }


def _emit(**record: Any) -> None:
    print(json.dumps(record), flush=True)


def _every(n: int) -> int:
    return max(1, n // 50)


def _own_validation_log(directory: str, i: int) -> None:
    """Give the next Vulkan instance its own validation log (the layer rewrites its log file at
    every vkCreateInstance), with the object tracker reporting what vkDestroy* leaves behind."""
    path = os.path.join(directory, f"instance-{i:04d}")
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "vk_layer_settings.txt"), "w") as settings:
        settings.write(
            f"khronos_validation.log_filename = {path}/validation.log\n"
            "khronos_validation.report_flags = error,warn,perf\n"
            "khronos_validation.debug_action = VK_DBG_LAYER_ACTION_LOG_MSG\n"
        )
    os.environ["VK_LAYER_SETTINGS_PATH"] = path
    os.environ["VK_INSTANCE_LAYERS"] = "VK_LAYER_KHRONOS_validation"


def manager_cycles(n: int) -> None:
    """Create and destroy a raw kp.Manager (with one buffer and sequence) n times."""
    import numpy as np

    from vk_adam._runtime import kp_module

    kp = kp_module()
    validation_dir = os.environ.get("PROBE_VALIDATION_DIR")
    _emit(i=-1, **_proc())
    for i in range(n):
        if validation_dir:
            _own_validation_log(validation_dir, i)
        t0 = time.perf_counter()
        mgr = kp.Manager(0)
        t1 = time.perf_counter()
        buf = mgr.tensor_t(np.zeros(256, np.float32))
        seq = mgr.sequence()
        seq.record(kp.OpTensorSyncDevice([buf]))
        seq.eval()
        t2 = time.perf_counter()
        mgr.destroy()
        t3 = time.perf_counter()
        del buf, seq, mgr
        if i % _every(n) == 0 or i == n - 1:
            _emit(i=i, create_s=t1 - t0, use_s=t2 - t1, destroy_s=t3 - t2, **_proc())


def managers_alive(n: int) -> None:
    """Open n raw kp.Managers and keep them all alive."""
    from vk_adam._runtime import kp_module

    kp = kp_module()
    alive = []
    for i in range(n):
        t0 = time.perf_counter()
        alive.append(kp.Manager(0))
        if i % _every(n) == 0 or i == n - 1:
            _emit(i=i, alive=len(alive), create_s=time.perf_counter() - t0, **_proc())
    for mgr in alive:
        mgr.destroy()
    _emit(i=n, alive=0, **_proc())


def _optimizer(np: Any, vk_adam: Any, size: int) -> Any:
    return vk_adam.AdamW([np.zeros(size, np.float32)], lr=1e-3)


def optimizer_cycles(n: int) -> None:
    """n cycles of: build an AdamW optimizer, one step, close."""
    import numpy as np

    import vk_adam

    grad = [np.ones(1024, np.float32)]
    _emit(i=-1, **_proc())
    for i in range(n):
        t0 = time.perf_counter()
        opt = _optimizer(np, vk_adam, 1024)
        t1 = time.perf_counter()
        opt.step(grad)
        t2 = time.perf_counter()
        opt.close()
        t3 = time.perf_counter()
        if i % _every(n) == 0 or i == n - 1:
            _emit(i=i, create_s=t1 - t0, step_s=t2 - t1, close_s=t3 - t2, **_proc())


def optimizers_alive(n: int) -> None:
    """Keep n AdamW optimizers alive at once, then step each and close them all."""
    import numpy as np

    import vk_adam

    alive = []
    for i in range(n):
        t0 = time.perf_counter()
        alive.append(_optimizer(np, vk_adam, 256))
        if i % _every(n) == 0 or i == n - 1:
            _emit(i=i, alive=len(alive), create_s=time.perf_counter() - t0, **_proc())
    for opt in alive:
        opt.step([np.ones(256, np.float32)])
    t0 = time.perf_counter()
    for opt in alive:
        opt.close()
    _emit(i=n, alive=0, stepped=n, close_all_s=time.perf_counter() - t0, **_proc())


def construction(n: int) -> None:
    """Construction and close() times: the first optimizer of the process, then n more (each
    built and closed while the first stays open, and n built and closed with nothing open)."""
    import numpy as np

    import vk_adam

    t0 = time.perf_counter()
    first = _optimizer(np, vk_adam, 1024)
    _emit(kind="first", create_s=time.perf_counter() - t0)
    for kind in ("beside_first", "alone"):
        if kind == "alone":
            t0 = time.perf_counter()
            first.close()
            _emit(kind="close_first", close_s=time.perf_counter() - t0)
        for _ in range(n):
            t0 = time.perf_counter()
            opt = _optimizer(np, vk_adam, 1024)
            t1 = time.perf_counter()
            opt.close()
            _emit(kind=kind, create_s=t1 - t0, close_s=time.perf_counter() - t1)


def object_cycles(n: int) -> None:
    """Which object kind grows memory: n create/destroy cycles of each kind of kp object on
    one shared manager (buffer, pipeline binding, sequence), then glibc's malloc_trim(0)."""
    import ctypes

    import numpy as np

    import vk_adam
    from vk_adam._rules.spirv import load_spirv
    from vk_adam._runtime import kp_module

    kp = kp_module()
    dev = vk_adam.open_device()
    mgr = dev.manager
    spirv = load_spirv("copy")
    keep = [mgr.tensor(np.zeros(256, np.float32)) for _ in range(2)]

    def buffer() -> None:
        mgr.tensor(np.zeros(256, np.float32)).destroy()

    def pipeline() -> None:
        algo = mgr.algorithm(keep, spirv, [1, 1, 1], np.zeros(0, np.float32), np.zeros(1, np.float32))
        algo.destroy()

    def sequence() -> None:
        seq = mgr.sequence()
        seq.record(kp.OpTensorSyncDevice([keep[0]]))
        seq.eval()
        seq.destroy()

    four = [mgr.tensor(np.zeros(256, np.float32)) for _ in range(4)]
    adam = load_spirv("adam")

    def dispatch() -> None:
        # A 4-binding descriptor set on the shared Adam pipeline, one dispatch evaluated.
        algo = mgr.algorithm(four, adam, [1, 1, 1], np.zeros(0, np.float32), np.zeros(8, np.float32))
        seq = mgr.sequence()
        seq.record(kp.OpAlgoDispatch(algo, np.zeros(8, np.float32)))
        seq.eval()
        seq.destroy()
        algo.destroy()

    def optimizer_unstepped() -> None:
        vk_adam.AdamW([np.zeros(1024, np.float32)]).close()

    def optimizer() -> None:
        opt = vk_adam.AdamW([np.zeros(1024, np.float32)])
        opt.step([np.ones(1024, np.float32)])
        opt.close()

    for kind, fn in (
        ("buffer", buffer),
        ("pipeline", pipeline),
        ("sequence", sequence),
        ("dispatch", dispatch),
        ("optimizer-unstepped", optimizer_unstepped),
        ("optimizer", optimizer),
    ):
        for _ in range(min(200, n)):
            fn()  # warm-up: allocator pools reach their working size
        before = _proc()["rss_mib"]
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        seconds = time.perf_counter() - t0
        after = _proc()["rss_mib"]
        ctypes.CDLL("libc.so.6").malloc_trim(0)
        trimmed = _proc()["rss_mib"]
        _emit(
            kind=kind,
            n=n,
            us_per_cycle=round(seconds / n * 1e6, 1),
            rss_before_mib=before,
            rss_after_mib=after,
            rss_after_trim_mib=trimmed,
            kib_per_cycle=round((after - before) * 1024 / n, 3),
        )
    for t in keep + four:
        t.destroy()
    dev.close()


def _malloc_totals() -> dict[str, float]:
    """glibc's heap over every arena (malloc_info): bytes obtained from the system, and bytes in
    use (obtained minus free chunks, plus mmapped chunks), in MiB."""
    import ctypes
    import re
    import tempfile

    libc = ctypes.CDLL("libc.so.6")
    libc.fopen.restype = ctypes.c_void_p
    libc.fopen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    libc.fclose.argtypes = [ctypes.c_void_p]
    libc.malloc_info.argtypes = [ctypes.c_int, ctypes.c_void_p]
    with tempfile.NamedTemporaryFile(suffix=".xml") as tmp:
        fp = libc.fopen(tmp.name.encode(), b"w")
        libc.malloc_info(0, fp)
        libc.fclose(fp)
        xml = open(tmp.name).read()
    tail = xml[xml.rfind("</heap>") :]  # the totals over every arena follow the last heap

    def total(kind: str, attr: str = "size") -> int:
        match = re.search(rf'<(?:total|system) type="{kind}"[^>]*{attr}="(\d+)"', tail)
        return int(match.group(1)) if match else 0

    system = total("current")
    free = total("fast") + total("rest")
    mmapped = total("mmap")
    return {
        "malloc_system_mib": round(system / 2**20, 3),
        "malloc_in_use_mib": round((system - free + mmapped) / 2**20, 3),
        "malloc_mmap_mib": round(mmapped / 2**20, 3),
    }


def heap_growth(n: int) -> None:
    """Where an optimizer cycle's memory growth lives: n cycles (build an AdamW optimizer, one
    step, close) in 5 phases after a warm-up, each phase sampled for RSS, glibc's heap in use
    (native allocations) and Python's own allocations (tracemalloc, when $PROBE_TRACEMALLOC is
    set), with the Python allocation sites that grew most. $PROBE_HARD_EXIT ends the process
    without any clean-up, so a heap profiler counts everything still alive as leaked."""
    import gc
    import tracemalloc

    import numpy as np

    import vk_adam

    frames = int(os.environ.get("PROBE_TRACEMALLOC", "0"))
    grad = [np.ones(1024, np.float32)]

    def cycle() -> None:
        opt = _optimizer(np, vk_adam, 1024)
        opt.step(grad)
        opt.close()

    for _ in range(min(1000, n)):
        cycle()  # warm-up: pools, caches and allocator arenas reach their working size
    if frames:
        tracemalloc.start(frames)
    first = tracemalloc.take_snapshot() if frames else None
    phase = max(1, n // 5)
    for k in range(5):
        t0 = time.perf_counter()
        for _ in range(phase):
            cycle()
        gc.collect()
        _emit(
            phase=k,
            cycles=(k + 1) * phase,
            us_per_cycle=round((time.perf_counter() - t0) / phase * 1e6, 1),
            python_traced_mib=round(tracemalloc.get_traced_memory()[0] / 2**20, 3) if frames else None,
            gc_objects=len(gc.get_objects()),
            **_malloc_totals(),
            **_proc(),
        )
    if first is not None:
        grown = tracemalloc.take_snapshot().compare_to(first, "traceback")
        for stat in grown[:15]:
            _emit(
                python_site_grew_kib=round(stat.size_diff / 1024, 1),
                count_diff=stat.count_diff,
                traceback=[f"{f.filename}:{f.lineno}" for f in stat.traceback][-frames:],
            )
    if os.environ.get("PROBE_HARD_EXIT"):
        sys.stdout.flush()
        os._exit(0)


PROBES = {
    "heap-growth": heap_growth,
    "object-cycles": object_cycles,
    "manager-cycles": manager_cycles,
    "managers-alive": managers_alive,
    "optimizer-cycles": optimizer_cycles,
    "optimizers-alive": optimizers_alive,
    "construction": construction,
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("probe", choices=sorted(PROBES))
    parser.add_argument("--n", type=int, default=100)
    parser.add_argument("--out", help="append the samples and the outcome here (JSON lines)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        PROBES[args.probe](args.n)
        return 0
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, __file__, args.probe, "--n", str(args.n), "--child"],
        capture_output=True,
        text=True,
        check=False,
    )
    samples = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    outcome = {
        "probe": args.probe,
        "n": args.n,
        "rc": proc.returncode,
        "wall_s": round(time.perf_counter() - t0, 2),
        "samples": len(samples),
        "last": samples[-1] if samples else None,
        "stderr_tail": proc.stderr[-3000:],
    }
    if args.out:
        with open(args.out, "a") as out:
            for sample in samples:
                out.write(json.dumps({"probe": args.probe, **sample}) + "\n")
            out.write(json.dumps({"outcome": outcome}) + "\n")
    print(json.dumps(outcome, indent=1))
    return 0 if proc.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
