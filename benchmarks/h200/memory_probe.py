"""How much a device lets kp allocate, by kind of buffer: device tensors (device-local memory and
a host-visible staging copy each), storage tensors (device-local only) and host tensors
(host-visible only). Buffers of ``--gib`` GiB are made one after another until an allocation fails
(vk-adam's patched kp raises; patch 0022) or ``--most`` are held, then all are freed. Prints the
memory heaps and one JSON line per kind, and writes ``memory_probe.json`` to ``--out``.

    python benchmarks/h200/memory_probe.py --out DIR
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import time
from pathlib import Path

import numpy as np


def probe(mgr: object, kind: object, n: int, most: int) -> dict:
    data = np.zeros(n, np.float32)  # calloc: pages never touched unless kp copies them
    made, times, error = [], [], None
    for _ in range(most):
        t = time.perf_counter()
        try:
            made.append(mgr.tensor_t(data, tensor_type=kind))  # type: ignore[attr-defined]
        except RuntimeError as exc:
            error = str(exc)
            break
        times.append(time.perf_counter() - t)
        print(f"  {kind}: {len(made)} made ({times[-1]:.2f} s)", flush=True)
    held = len(made) * data.nbytes
    for tensor in made:
        tensor.destroy()
    return {
        "kind": str(kind),
        "made": len(made),
        "held_gib": held / 2**30,
        "seconds_each": [round(s, 3) for s in times],
        "error": error,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gib", type=int, default=3)
    parser.add_argument("--most", type=int, default=48)
    parser.add_argument("--out", type=Path, default=Path("."))
    args = parser.parse_args()
    faulthandler.enable()
    import kp

    import vk_adam
    from vk_adam._runtime import Runtime

    handle = vk_adam.open_device()
    rt = Runtime(manager=handle.manager)
    heaps = [
        {"size_gib": h.size / 2**30, "device_local": h.device_local} for h in rt.facts.limits.memory_heaps
    ]
    print("heaps:", heaps, flush=True)
    n = args.gib << 28
    rows = {"buffer_gib": args.gib, "heaps": heaps, "kinds": []}
    for kind in (kp.TensorTypes.storage, kp.TensorTypes.device, kp.TensorTypes.host):
        row = probe(handle.manager, kind, n, args.most)
        print(json.dumps(row), flush=True)
        rows["kinds"].append(row)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "memory_probe.json").write_text(json.dumps(rows, indent=2))
    rt.close()
    handle.close()


if __name__ == "__main__":
    main()
