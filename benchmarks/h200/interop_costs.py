"""What each piece of a hand-over between Vulkan and CUDA costs on this machine, measured apart
(median us of 200 after 20 warm-ups, host wall time around a synchronous call):
* Vulkan submissions of recorded sequences (no CUDA work): empty; an ownership release to
  VK_QUEUE_FAMILY_EXTERNAL; an acquire from it; both; a 64 MiB copy between plain device
  buffers and between exportable ones;
* CUDA: an add on a plain tensor and on a view of a Vulkan buffer, each with a synchronize;
* the three submissions of a ZeRO-1 step with NCCL on the Vulkan buffers (world size 1), each
  submitted again alone, and the update's recording apart from its submission."""

import os
import time

import kp
import numpy as np
import torch
import torch.distributed as dist

import vk_adam.distributed as vkd
from vk_adam import interop
from vk_adam._rules.spirv import load_spirv
from vk_adam._runtime import Runtime
from vk_adam._runtime import external as ext


def median_us(f, n=200, warm=20):
    s = []
    for _ in range(n + warm):
        a = time.perf_counter()
        f()
        s.append(time.perf_counter() - a)
    return 1e6 * float(np.median(s[warm:]))


def recorded(mgr, ops):
    seq = mgr.sequence()
    for op in ops:
        seq.record(op)
    return seq


torch.cuda.set_device(0)
torch.cuda.synchronize()
mgr = kp.Manager()
big = 1 << 24
small = interop.exportable_tensor(mgr, np.ones(1024, np.float32))
ex_a = interop.exportable_tensor(mgr, np.ones(big, np.float32))
ex_b = interop.exportable_tensor(mgr, np.zeros(big, np.float32))
pa, pb = mgr.tensor(np.ones(big, np.float32)), mgr.tensor(np.zeros(big, np.float32))
mgr.sequence().eval(kp.OpTensorSyncDevice([pa, pb]))
acc, st = kp.AccessFlagBits, kp.PipelineStageFlagBits
w = int(acc.transfer_write)
rw = w | int(acc.transfer_read)


def copy(src, dst):
    bar = kp.OpMemoryBarrier([src, dst], w, rw, int(st.transfer), int(st.transfer))
    return [bar, ext.copy_regions_op(src, dst, [(0, 0, 4 * big)]), bar]


release = ext.ownership_transfer_op([small], mgr, to_external=True)
acquire = ext.ownership_transfer_op([small], mgr, to_external=False)
rows = {
    "empty sequence": recorded(mgr, [kp.OpMemoryBarrier([small], w, rw, int(st.transfer), int(st.transfer))]),
    "acquire from EXTERNAL + release": recorded(mgr, [acquire, release]),
    "64 MiB copy, plain buffers": recorded(mgr, copy(pa, pb)),
    "64 MiB copy, exportable buffers": recorded(mgr, copy(ex_a, ex_b)),
}
rt0 = Runtime(manager=mgr)
words = rt0.pipeline([pa, pb], load_spirv("copy_words"), big, (), 3)
fill = rt0.pipeline([pb], load_spirv("fill_words"), big, (), 2)
rows["64 MiB compute copy (copy_words.comp), plain buffers"] = recorded(
    mgr, [rt0.dispatch_op(words, np.array([0, 0, big], np.uint32).view(np.float32))]
)
rows["64 MiB compute clear (fill_words.comp)"] = recorded(
    mgr, [rt0.dispatch_op(fill, np.array([0, big], np.uint32).view(np.float32))]
)
for name, seq in rows.items():
    if seq is not None:
        print(f"{name}: {median_us(seq.eval):.1f} us", flush=True)
rel, acq = recorded(mgr, [release]), recorded(mgr, [acquire])
acq.eval()  # hold it on Vulkan's side first
print(f"release then acquire, two submissions: {median_us(lambda: (rel.eval(), acq.eval())):.1f} us")
s = []
for _ in range(220):
    rel.eval()
    a = time.perf_counter()
    acq.eval()
    s.append(time.perf_counter() - a)
print(f"  of which the acquire's submission: {1e6 * np.median(s[20:]):.1f} us")
rel.eval()
view = interop.as_torch(small)
plain = torch.ones(1024, device="cuda")
for name, t in (("plain tensor", plain), ("view of a Vulkan buffer", view)):
    us = median_us(lambda t=t: (t.add_(1), torch.cuda.synchronize()))
    print(f"CUDA add + synchronize, {name}: {us:.1f} us")
s = []
for _ in range(220):
    view.add_(1)
    torch.cuda.synchronize()
    a = time.perf_counter()
    acq.eval()
    s.append(time.perf_counter() - a)
    rel.eval()
print(f"acquire's submission right after a CUDA add on it: {1e6 * np.median(s[20:]):.1f} us", flush=True)

os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
os.environ.setdefault("MASTER_PORT", "29534")
dist.init_process_group("nccl", rank=0, world_size=1)
rng = np.random.default_rng(0)
rt = Runtime()
params = [rt.buffer(rng.standard_normal(1 << 21).astype(np.float32)) for _ in range(8)]
grads = [rt.buffer(rng.standard_normal(1 << 21).astype(np.float32)) for _ in range(8)]
rt.run([rt.upload_op(params + grads)])
opt = vkd.ZeroRedundancyOptimizer(params, "adamw", manager=rt.manager, lr=1e-4)
parts = opt.internals()
nccl = parts.nccl
for _ in range(30):
    opt.step(grads)
print(f"ZeRO-1 step, NCCL world size 1: {median_us(lambda: opt.step(grads), 100):.1f} us")
for name in ("pull", "push"):
    seq = nccl.submissions[name]
    print(f"  its {name} submission again, alone: {median_us(seq.eval, 100):.1f} us")
record_s, eval_s = [], []
for _ in range(60):
    opt.step(grads)  # the update's recording and submission, timed apart below
for _ in range(60):
    torch.cuda.synchronize()
    a = time.perf_counter()
    parts.sync_hyper()
    nccl.record_update(parts.shard)
    b = time.perf_counter()
    nccl.run_update()
    c = time.perf_counter()
    record_s.append(b - a)
    eval_s.append(c - b)
recording, submission = (1e6 * np.median(x[10:]) for x in (record_s, eval_s))
print(f"  the update's recording: {recording:.1f} us; its submission: {submission:.1f} us")
opt.close()
# the same step, Vulkan's and CUDA's work ordered by a timeline semaphore instead of host waits
for order in ("semaphores", "host", "semaphores"):
    os.environ["VK_ADAM_NCCL_ORDER"] = order
    opt = vkd.ZeroRedundancyOptimizer(params, "adamw", manager=rt.manager, lr=1e-4)
    for _ in range(30):
        opt.step(grads)
    us = median_us(lambda o=opt: o.step(grads), 100)
    print(f"ZeRO-1 step, NCCL world size 1, {opt.device_staging}: {us:.1f} us")
    opt.close()
rt.close()
dist.destroy_process_group()
