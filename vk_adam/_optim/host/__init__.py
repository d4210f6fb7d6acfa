"""NumPy params and gradients to the device and back, in one place (``_optim``'s, not a face:
its modules are imported by name from within ``_optim``). Only ``_runtime`` drives kp; these
modules decide which array goes which way and ask ``_runtime`` for the copies.

* ``traffic``: ``HostTraffic``, a step's plan for every NumPy group: which arrays are imported,
  which go through staging memory, the copy ops in and out, and the copies back after the wait.
* ``imports``: host arrays' pages imported on the device (``VK_EXT_external_memory_host``),
  cached per array.
* ``staging``: large copies through staging memory in chunks, so host copies and GPU transfers
  overlap.
* ``slots``: params gathered into flat buffers at their offsets and scattered back.
* ``copy_threads``: the threads large host copies are split over.

Where each param lives in a flat buffer (``ParamSlot``, the plan of sets) is ``_optim.layout``'s:
the device buffers, state dicts and ZeRO-1's shards are laid out by it too.
"""
