"""``vk-adam bench``: one AdamW step, side by side with its peers, in one process and one run.

Backends per case:
  * ``vk-adam``            the flat buffer (one dispatch), GPU-resident params and grads
  * ``vk-adam per-tensor`` LoRA cases: one buffer set and dispatch per tensor (the layout of
                           the kernel vk-adam replaces), for the flat layout's gain
  * ``numpy-f64``          the float64 NumPy reference (CPU)
  * ``torch-cpu-foreach`` / ``torch-cpu-fused``   torch.optim.AdamW on the CPU
  * ``torch-cuda-fused``   torch.optim.AdamW(fused=True) on CUDA, when a CUDA device exists

Measured: GPU time (Vulkan timestamps; CUDA events), wall time of a synchronous step (host
waits), time per step when steps are issued back to back without host waits, and for vk-adam
the host time outside the driver's submit-and-wait. Effective bandwidth = bytes the step must
move / GPU time, against the same device's copy bandwidth measured in the same run.

Captured steps (``capturable=True``), in a second table: the GPU time of a captured step beside
the push-constant step's (timed alternately: what the device's step clock costs), one recording
of ``--steps-per-batch`` captured steps evaluated again and again (per step, and over the step's
own GPU time), and on CUDA torch's fused AdamW with ``capturable=True`` replayed in a CUDA graph
beside its launched steps.
Every figure is a median over ``--repeats`` runs after ``--warmup`` runs.

Modules: ``cases`` (what is measured, and the arguments), ``measure`` (how: the Vulkan and peer
measurements), ``report`` (the JSON, the table and the plot), ``peers`` (whether torch and CUDA
are here), ``formats`` and ``train`` (the storage-format and whole-step tables), ``run``
(``run_bench``: the run that ties them together).
"""

from __future__ import annotations

from .cases import add_bench_arguments
from .run import run_bench

__all__ = ["add_bench_arguments", "run_bench"]
