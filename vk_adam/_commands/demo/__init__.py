"""``vk-adam demo``: a LoRA fine-tune of a small model, trained by vk-adam on the host path or
GPU-resident (the example application), compared with float64 NumPy and torch.

``config`` (``DemoConfig``: the run's settings, learning rate and optimizer options), ``model``
(the model, data and float64 reference), ``run`` (the host path, checkpoints, the command),
``resident`` (the GPU-resident path), ``torch_peer`` (torch's run), ``output`` (curves, summary).
"""

from .run import run_demo, train_vk

__all__ = ["run_demo", "train_vk"]
