"""How the workgroup cap of the update dispatch changes its GPU time and back-to-back steps.

    python benchmarks/archive/grid_sweep.py [--sizes 22,24,26,28] [--caps 65535,8192,4224,2112,1056]

Each (cap, size, state format) runs in a child process (the cap is read when a runtime opens,
from $VK_ADAM_MAX_WORKGROUPS): AdamW on one device-resident tensor, median GPU time of the
update over 30 synchronous steps (timestamps), and ms/step of 20 steps recorded back to back
into one sequence. One JSON line per measurement on stdout. The update is a grid-stride loop,
so every cap gives the same results; only the time changes.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

CHILD = """
import json, sys, time
import numpy as np, vk_adam
from vk_adam._runtime import Runtime
n, state = int(sys.argv[1]), sys.argv[2]
rt = Runtime()
p = rt.buffer(np.random.default_rng(0).standard_normal(n, dtype=np.float32))
rt.run([rt.upload_op([p])])
opt = vk_adam.Optimizer([p], "adamw", manager=rt.manager, profile=True, zero_grad=False,
                        state_dtype=state, lr=1e-4)
g = opt.grad_buffer(0, 0)
g.data()[:] = np.random.default_rng(1).standard_normal(n, dtype=np.float32)
rt.run([rt.upload_op([g])])
for _ in range(5):
    opt.step()
gpu = []
for _ in range(30):
    opt.step()
    gpu.append(opt.last_gpu_seconds)
seq = rt.manager.sequence()
b2b = []
for _ in range(5):
    seq.clear()
    for _ in range(20):
        opt.record_step(seq)
    t0 = time.perf_counter()
    seq.eval()
    b2b.append((time.perf_counter() - t0) / 20)
seq.destroy()
groups = rt.workgroup_cap
opt.close()
rt.close()
print(json.dumps({"gpu_ms": float(np.median(gpu)) * 1e3, "b2b_ms": float(np.median(b2b[1:])) * 1e3,
                  "cap_in_effect": groups}))
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--sizes", default="22,24,26,28", help="log2 element counts")
    parser.add_argument("--caps", default="65535,8192,4224,2112,1056")
    parser.add_argument("--states", default="float32,int8-blockwise")
    args = parser.parse_args()
    for state in args.states.split(","):
        for k in (int(s) for s in args.sizes.split(",")):
            for cap in (int(c) for c in args.caps.split(",")):
                env = {**os.environ, "VK_ADAM_MAX_WORKGROUPS": str(cap)}
                t0 = time.perf_counter()
                done = subprocess.run(
                    [sys.executable, "-c", CHILD, str(2**k), state],
                    env=env,
                    capture_output=True,
                    text=True,
                    check=False,
                )
                row = {"state": state, "log2_n": k, "cap": cap, "wall_s": round(time.perf_counter() - t0, 1)}
                if done.returncode == 0:
                    row.update(json.loads(done.stdout.strip().splitlines()[-1]))
                else:
                    row["error"] = done.stderr.strip().splitlines()[-1:]
                print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
