"""A Vulkan buffer read and edited by torch on CUDA, with no copy.

vk-adam's AdamW steps the weights on Vulkan; torch sees the same memory through
``interop.as_torch`` and clamps them in CUDA. ``to_cuda`` / ``to_vulkan`` hand the buffer from
one API to the other. Needs an NVIDIA GPU with torch's CUDA build:

    python examples/interop/cuda_view.py
"""

import kp
import numpy as np

import vk_adam
from vk_adam import interop

manager = kp.Manager()
weights = interop.exportable_tensor(manager, np.zeros(1024, np.float32))
grads = interop.exportable_tensor(manager, np.ones(1024, np.float32))
view = interop.as_torch(weights)  # a CUDA tensor over the same memory

with vk_adam.AdamW([weights], lr=0.1, weight_decay=0.0, zero_grad=False, manager=manager) as opt:
    for step in range(1, 4):
        opt.step([grads])  # Vulkan writes the weights
        interop.to_cuda(weights)  # from here CUDA may read and write them
        print(f"step {step}: {view[0].item():+.4f} on CUDA")
        view.clamp_(min=-0.25)  # an edit in CUDA
        interop.to_vulkan(weights)  # Vulkan's next step sees it

manager.sequence().eval(kp.OpTensorSyncLocal([weights]))
print(f"after 3 steps, clamped at -0.25: {weights.data()[0]:+.4f} on Vulkan")
