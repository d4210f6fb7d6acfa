"""Host waits against timeline semaphores, for ordering Vulkan's and CUDA's work on one buffer:
one round trip is a Vulkan submission (an ownership release to VK_QUEUE_FAMILY_EXTERNAL after a
write), a CUDA kernel on the buffer's view, and a Vulkan submission (the acquire, then a read
and write). Median us of 200 after 20, at 1 Ki and 16 Mi float32:

* host waits: each Vulkan submission's fence waited for on the host, and the CUDA stream
  synchronized before the second submission (what vk_adam.interop.to_cuda / to_vulkan do);
* semaphores: one exported timeline semaphore; the first submission signals it, the CUDA
  stream waits for that value (cuWaitExternalSemaphoresAsync) and signals the next after its
  kernel, the second submission waits for that; the host waits only for the last fence.

Both are checked: after the round trips every value is what the adds make it."""

import time

import kp
import numpy as np
import torch

from vk_adam import interop
from vk_adam._rules.spirv import load_spirv
from vk_adam._runtime import Runtime, cuda
from vk_adam._runtime import external as ext

torch.cuda.set_device(0)
torch.cuda.synchronize()
mgr = kp.Manager()
rt = Runtime(manager=mgr)
print("timeline semaphores:", mgr.has_timeline_semaphores(), "fd export:", mgr.has_semaphore_fd_export())
ordinal = cuda.device_for_uuid(interop.device_uuid(mgr)).ordinal
drv = cuda.driver()
acc, st = kp.AccessFlagBits, kp.PipelineStageFlagBits


def read(t):
    mgr.sequence().eval(kp.OpTensorSyncLocal([t]))
    return np.array(t.data())


def measure(n):
    t = interop.exportable_tensor(mgr, np.zeros(n, np.float32))
    other = mgr.tensor(np.zeros(n, np.float32))
    mgr.sequence().eval(kp.OpTensorSyncDevice([t, other]))
    copy = rt.pipeline([t, other], load_spirv("copy_words"), n, (), 3)
    back = rt.pipeline([other, t], load_spirv("copy_words"), n, (), 3)
    push = np.array([0, 0, n], np.uint32).view(np.float32)
    rw = int(acc.shader_read | acc.shader_write)
    bar = kp.OpMemoryBarrier([t, other], rw, rw, int(st.compute_shader), int(st.compute_shader))
    # Vulkan: t -> other -> t (a read and a write of t), then the release to CUDA
    give = mgr.sequence()
    for op in [rt.dispatch_op(copy, push), bar, rt.dispatch_op(back, push)]:
        give.record(op)
    give.record(ext.ownership_transfer_op([t], mgr, to_external=True))
    take = mgr.sequence()
    take.record(ext.ownership_transfer_op([t], mgr, to_external=False))
    for op in [bar, rt.dispatch_op(copy, push), bar, rt.dispatch_op(back, push)]:
        take.record(op)
    view = interop.as_torch(t)  # made while Vulkan holds t; the rounds hand it over themselves
    stream = torch.cuda.current_stream().cuda_stream

    def host_waits():
        give.eval()
        view.add_(1.0)
        torch.cuda.synchronize()
        take.eval()

    sem = mgr.timeline_semaphore(0, exportable=True)
    imported = drv.import_semaphore(ordinal, sem.fd())
    counter = [0]

    def semaphores():
        v = counter[0]
        give.eval_async_with(wait=[], signal=[(sem, v + 1)])
        drv.semaphore_async(ordinal, imported, v + 1, stream, signal=False)
        view.add_(1.0)
        drv.semaphore_async(ordinal, imported, v + 2, stream, signal=True)
        take.eval_async_with(wait=[(sem, v + 2)], signal=[(sem, v + 3)])
        counter[0] = v + 3
        give.eval_await()
        take.eval_await()

    for name, f in (("host waits", host_waits), ("timeline semaphores", semaphores)):
        before = float(read(t)[0])
        samples = []
        for _ in range(220):
            a = time.perf_counter()
            f()
            samples.append(time.perf_counter() - a)
        right = bool(np.all(read(t) == before + 220))
        print(
            f"n={n} {name}: median {1e6 * np.median(samples[20:]):.1f} us, values right: {right}", flush=True
        )
    drv.destroy_semaphore(ordinal, imported)
    sem.destroy()


for n in (1 << 10, 1 << 24):
    measure(n)
