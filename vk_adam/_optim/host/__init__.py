"""NumPy params and gradients to the device and back, in one place (``_optim``'s, not a face:
its modules are imported by name from within ``_optim``). Only ``_runtime`` drives kp; these
modules decide which array goes which way and ask ``_runtime`` for the copies.

* ``to_device``: ``HostToDevice``, a step's plan for every NumPy group before it runs: which
  arrays are imported, which are gathered into staging memory, the copy ops in and out that
  the step records, and what comes back to the host after the wait.
* ``to_host``: ``DeviceToHost``, the host's side of the way back after a synchronous step's
  wait (the staged params scattered into the arrays, chunked downloads), and ``copy_back``
  after an asynchronous step.
* ``imports``: host arrays' pages imported on the device (``VK_EXT_external_memory_host``),
  cached per array.
* ``staging``: large copies through staging memory in chunks, so host copies and GPU transfers
  overlap (chunked uploads for ``to_device``, chunked downloads for ``to_host``).
* ``copy_threads``: large host copies split over threads (``copy_into``).

Where each param lives in a flat buffer (``ParamSlot``, the plan of sets) is ``_optim.layout``'s:
the device buffers, state dicts and ZeRO-1's shards are laid out by it too.
"""
