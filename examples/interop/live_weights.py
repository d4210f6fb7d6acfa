"""A trainer steps AdamW on an exportable param buffer; a reader process, with its own VkDevice,
imports that buffer by fd and reads every step's weights live, with no copy.

    python examples/interop/live_weights.py [--steps N]

The trainer sends the reader one line per step on its stdin (after the step has finished on the
GPU); the reader downloads the shared memory through its own device and prints a checksum,
which the trainer compares with its own copy of the weights.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

import numpy as np

READER = r"""
import json, os, sys
import numpy as np
import kp
from vk_adam import interop

fd, meta = int(sys.argv[1]), json.loads(sys.argv[2])
mgr = kp.Manager()                                  # this process's own VkDevice
weights = interop.import_memory(fd, meta, manager=mgr)   # imports a dup of the fd
os.close(fd)                                        # ours to close: the import holds the memory
seq = mgr.sequence()
for line in sys.stdin:                              # one line per finished step
    seq.eval(kp.OpTensorSyncLocal([weights]))       # device memory -> this process's staging
    w = weights.data()
    seen = {"step": int(line), "sum": float(np.sum(w, dtype=np.float64))}
    print(json.dumps(seen), flush=True)
"""


def main() -> int:
    import kp

    import vk_adam
    from vk_adam import interop

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=5)
    args = parser.parse_args()

    rng = np.random.default_rng(0)
    n = 16 * 1024  # a LoRA adapter's flat param buffer
    mgr = kp.Manager()
    params = interop.exportable_tensor(mgr, rng.standard_normal(n).astype(np.float32))
    grads = mgr.tensor(np.zeros(n, np.float32))
    opt = vk_adam.AdamW([params], manager=mgr, lr=1e-2)
    with interop.export_memory(params) as shared:
        reader = subprocess.Popen(
            [sys.executable, "-c", READER, str(shared.fd), json.dumps(shared.metadata())],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            pass_fds=[shared.fd],
        )
    assert reader.stdin is not None and reader.stdout is not None
    worst = 0.0
    for step in range(1, args.steps + 1):
        grads.data()[:] = rng.standard_normal(n).astype(np.float32)
        mgr.sequence().eval(kp.OpTensorSyncDevice([grads]))
        opt.step([grads])  # synchronous: finished on the GPU when it returns
        mgr.sequence().eval(kp.OpTensorSyncLocal([params]))
        mine = float(np.sum(params.data(), dtype=np.float64))
        reader.stdin.write(f"{step}\n")
        reader.stdin.flush()
        seen = json.loads(reader.stdout.readline())
        worst = max(worst, abs(seen["sum"] - mine))
        print(f"step {step}: trainer sum {mine:.6f}, reader sum {seen['sum']:.6f}")
    reader.stdin.close()
    reader.wait()
    opt.close()
    if worst != 0.0 or reader.returncode != 0:
        print(f"reader disagrees (worst {worst}) or failed ({reader.returncode})", file=sys.stderr)
        return 1
    print("the reader saw every step's weights, bit for bit")
    return 0


if __name__ == "__main__":
    sys.exit(main())
