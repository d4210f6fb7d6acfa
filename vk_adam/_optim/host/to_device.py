"""NumPy params and gradients to the device for one step, and the plan of the way back.

:class:`HostToDevice` decides, per step and buffer set of every NumPy group, how each array
reaches the device: imported (the GPU copies from its pages, or the update reads it there),
gathered into staging memory and uploaded whole in the step, or uploaded in chunks before it
(``staging``). It also makes the copy ops the step records to bring the updated params back
(into an import, or into staging memory), and tells ``to_host``'s :class:`DeviceToHost` what
the host copies into the arrays after the wait.

Where the device imports host memory (``VK_EXT_external_memory_host``), a synchronous step copies
each large NumPy array straight between its own pages and the group's flat device buffers
(byte-range copies, so any address works), instead of through the buffers' staging memory with
a NumPy copy each way. Pinning pages takes time, so imports are cached per array: a param is
imported at its first synchronous step, a gradient when the same array comes a second time (a
training loop reuses its gradient arrays). A fresh array each step would pay for pinning and
unpinning its pages every step, which costs more than copying it once through staging memory
over several threads (``copy_threads.copy_into``), so it takes the staging path instead (the timings
of both: ``benchmarks/results/h200-2026-12-03-host/``, "The pieces").

A group of one float32 param goes further: its param's import is bound to the update shader
itself, which reads and writes the array over PCIe in both directions at once, instead of a copy
in before the update and a copy out after it. (The flat param buffer is then not kept current;
``param_buffer()`` brings it up to date and turns this off for the optimizer.)

With ``device_params=True`` the device's flat buffers hold the params: a step copies nothing of
them in, only the updated values out (through the param's import, or staging memory), and
``reload_params()`` makes one step read the arrays first.

Everything else keeps the staging path: small arrays (below :data:`MIN_IMPORT_BYTES`),
read-only or non-contiguous ones, memory the driver refuses, asynchronous steps (their inputs
are snapshot when ``step()`` returns), and devices without the extension.

An import lives while its array does: a weak reference drops it when the array dies, and a step
that finds an array at another address or size (``ndarray.resize(refcheck=False)``) drops the
old import before it makes a new one. Only synchronous steps use imports, and they have finished
when ``step()`` returns, so no GPU work can still use an import that is dropped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from ... import _formats as fmt
from ..._runtime import Runtime, copy_regions_op, host_read_barrier_op
from ..buffers import Group
from ..layout import ParamSlot
from .copy_threads import PARALLEL_COPY_BYTES, copy_into
from .imports import HostImports
from .staging import chunk_ranges, upload_in_chunks
from .to_host import DeviceToHost

F32 = npt.NDArray[np.float32]


def part_of(value: Any, part: ParamSlot, param: ParamSlot) -> Any:
    """``value`` (an array shaped like ``param``: its gradient, say) restricted to ``part``, one
    of the param's parts: the array itself for a whole param, else a flat slice (a view where
    ``value`` is contiguous)."""
    if not param.pieces:
        return value
    return np.asarray(value).reshape(-1)[part.start : part.start + part.size]


def gather(slots: Sequence[ParamSlot], values: Sequence[Any], flat: F32) -> None:
    """Copy each slot's value (an array of the slot's size; for a piece, of the piece's) into
    ``flat`` at its offset (a small one here, a large one over the copy threads)."""
    for slot, value in zip(slots, values, strict=True):
        dst, src = flat[slot.offset : slot.offset + slot.size], np.asarray(value).reshape(-1)
        if dst.nbytes < PARALLEL_COPY_BYTES:
            np.copyto(dst, src, casting="unsafe")
        else:
            copy_into(dst, src)


@dataclass
class _GroupPlan:
    """A NumPy group's copies for one synchronous step, kept while its imports do not change."""

    key: tuple[Any, ...]
    copy_in: list[Any]
    copy_out: list[Any]
    staged_params: list[ParamSlot]  # copied through staging (gathered before, scattered after)
    staged_grads: list[int]  # slot indices whose gradient goes through staging
    whole: tuple[bool, bool]  # (params, grads) all staged: whole-buffer upload instead of regions
    param: Any = None  # an imported param the update shader binds itself (with its size)
    n: int = 0
    grad: Any = None  # an imported gradient the update shader reads itself


@dataclass
class HostToDevice:
    """How the NumPy groups' params and gradients reach the device, per step, and the ops and
    host copies (``back``) that bring the updated params back.

    Everything is per buffer set: a NumPy group larger than one device allocation has several,
    each holding some of its params or pieces of one (``Group.parts``)."""

    rt: Runtime
    imports: HostImports
    back: DeviceToHost  # what the host copies into the arrays after a synchronous step's wait
    copy_in: list[Any] = field(default_factory=list)  # ops after the uploads, before the update
    copy_out: list[Any] = field(default_factory=list)  # ops after the update
    #: per (group index, set index): the param tensor this step's update binds, its elements,
    #: and the gradient tensor it reads
    bound: dict[tuple[int, int], tuple[Any, int, Any]] = field(default_factory=dict)
    #: single-param float32 groups may bind their param's import in the update shader
    direct: bool = True
    #: the update may read a gradient's import itself (no pass over the gradients before it)
    grads_bindable: bool = False
    #: groups whose shader can write an imported param while it reads the device's copy
    #: (``VK_ADAM_PARAM_OUT``): with ``held``, their single float32 param is written in place
    param_out_groups: set[int] = field(default_factory=set)
    #: the device holds the params (``device_params``): they only come back to the arrays
    held: bool = False
    reload: bool = False  # the next step reads the arrays into the device's params first
    used_direct: bool = False  # a step did: the flat param buffers are not current
    _plans: dict[tuple[int, int], _GroupPlan] = field(default_factory=dict)  # by (group, set)
    _download_all: Any = None

    def stage(self, groups: Sequence[Group], prepared: list[list[Any]] | None, direct: bool) -> list[Any]:
        """Write what goes through staging memory for every NumPy group, set this step's copy
        ops; return the buffers to upload whole. ``direct``: a synchronous step (imports)."""
        self.copy_in, self.copy_out, self.bound = [], [], {}
        back = self.back
        if back.uploading:  # a synchronous step that stopped before its finish left them
            back.settle()
        back.scatters, back.chunked = [], []
        upload: list[Any] = []
        downloads: list[Any] = []
        held, self.reload = self.held and not self.reload, False
        for gi, group in enumerate(groups):
            if not group.host_mode:
                continue
            for k, bset in enumerate(group.sets):
                if len(group.sets) == 1:  # every param whole, in this one set
                    slots, grads = group.slots, prepared[gi] if prepared is not None else None
                else:
                    members = group.parts(k)
                    slots = [part for _, part in members]
                    grads = (
                        [part_of(prepared[gi][i], part, group.slots[i]) for i, part in members]
                        if prepared is not None
                        else None
                    )
                params_in, grads_in = group.param_staging[k], group.grad_staging[k]
                use_imports = direct and self.imports.enabled
                plan = self._plan((gi, k), group, bset, slots, grads, held) if use_imports else None
                # a synchronous step copies large staged buffers in chunks (staging)
                chunks = chunk_ranges(slots, params_in.itemsize) if direct else None
                if plan is None:  # the staging path: every param and gradient through NumPy copies
                    if not held:
                        self._stage_in(bset.param, params_in, slots, [s.host for s in slots], chunks, upload)
                    if grads is not None:
                        self._stage_in(bset.grad, grads_in, slots, grads, chunks, upload)
                    self._stage_out(bset.param, params_in, slots, chunks, downloads)
                    continue
                self.copy_in += plan.copy_in
                self.copy_out += plan.copy_out
                if plan.param is not None or plan.grad is not None:
                    self.bound[gi, k] = (
                        plan.param if plan.param is not None else bset.param,
                        plan.n if plan.param is not None else bset.n,
                        plan.grad if plan.grad is not None else bset.grad,
                    )
                    self.used_direct = self.used_direct or (plan.param is not None and not held)
                if plan.staged_params:
                    if not held:
                        gather(plan.staged_params, [s.host for s in plan.staged_params], params_in)
                    back.scatters.append((plan.staged_params, params_in))
                if plan.whole[0]:  # no param imported: every one gathered above (plan.staged_params)
                    if not held:
                        upload.append(bset.param)
                    downloads.append(bset.param)
                if grads is not None and plan.staged_grads:
                    if plan.whole[1]:  # no gradient imported
                        self._stage_in(bset.grad, grads_in, slots, grads, chunks, upload)
                    else:
                        staged = [slots[i] for i in plan.staged_grads]
                        gather(staged, [grads[i] for i in plan.staged_grads], grads_in)
        if downloads:
            self.copy_out.append(self._download(downloads, groups))
        return upload

    def _stage_in(
        self,
        tensor: Any,
        staging: Any,
        slots: list[ParamSlot],
        values: Sequence[Any],
        chunks: list[tuple[int, int]] | None,
        upload: list[Any],
    ) -> None:
        """``values`` (one per slot) into ``tensor``: gathered into its staging memory and
        uploaded whole in the step (``upload``), or chunk by chunk before it (``chunks``)."""
        if chunks is None:
            gather(slots, values, staging)
            upload.append(tensor)
        else:
            self.back.uploading += upload_in_chunks(self.rt, tensor, staging, slots, values, chunks)

    def _stage_out(
        self,
        tensor: Any,
        staging: Any,
        slots: list[ParamSlot],
        chunks: list[tuple[int, int]] | None,
        downloads: list[Any],
    ) -> None:
        """The updated params of ``tensor`` back into the slots' arrays after the wait: downloaded
        whole in the step (``downloads``) and scattered, or chunk by chunk (``chunks``)."""
        if chunks is None:
            downloads.append(tensor)
            self.back.scatters.append((slots, staging))
        else:
            self.back.chunked.append((tensor, staging, slots, chunks))

    def _download(self, params: list[Any], groups: Sequence[Group]) -> Any:
        every = [b.param for g in groups if g.host_mode for b in g.sets]
        if len(params) != len(every):
            return self.rt.download_op(params)
        if self._download_all is None:
            self._download_all = self.rt.download_op(every)
        return self._download_all

    def _plan(
        self,
        key: tuple[int, int],
        group: Group,
        bset: Any,
        slots: list[ParamSlot],
        grads: list[Any] | None,
        held: bool,
    ) -> _GroupPlan | None:
        """This step's copies of one buffer set (``slots``, ``grads``: its params' and
        gradients) with at least one imported array (None: none is). ``held``: the device's
        params are current; they only come back."""
        single = (
            len(group.slots) == 1
            and len(group.sets) == 1  # not a param cut into pieces
            and len(bset.chunks) == 1  # a windowed set binds its own buffers' windows
            and bset.format.param == "float32"
            and bset.master is None
        )
        # The update binds the param's import: it reads and writes the array (the array is the
        # param), or, with the device holding the params, reads the device's copy and writes both.
        direct = single and (key[0] in self.param_out_groups if held else self.direct)
        bind_grads = direct and self.grads_bindable and grads is not None and grads[0].dtype == np.float32
        params, grad_imports = self.imports.of_set(
            [s.host for s in slots], grads, bind_param=direct, bind_grads=bind_grads
        )
        if not any(params) and not any(grad_imports):
            return None
        serials = (held, *(e.serial if e is not None else 0 for e in [*params, *grad_imports]))
        plan = self._plans.get(key)
        if plan is not None and plan.key == serials:
            return plan
        size = fmt.NUMPY_DTYPES[group.param_dtype].itemsize
        param, grad = bset.param, bset.grad
        plan = _GroupPlan(
            serials, [], [], [], [], (not any(params), grads is not None and not any(grad_imports))
        )
        host_visible: list[Any] = []
        staged_in: list[tuple[int, int, int]] = []
        for slot, entry in zip(slots, params, strict=True):
            span = (slot.offset * size, slot.size * size)
            if entry is None:
                plan.staged_params.append(slot)
                staged_in.append((span[0], span[0], span[1]))
                continue
            if direct and entry.bound:  # the update writes the array itself (and reads it, or not held)
                plan.param, plan.n = entry.tensor, slot.size
                plan.copy_out.append(host_read_barrier_op([entry.tensor], after_shader=True))
                continue
            if held:
                plan.copy_out.append(copy_regions_op(param, entry.tensor, [(span[0], entry.offset, span[1])]))
                host_visible.append(entry.tensor)
                continue
            plan.copy_in.append(copy_regions_op(entry.tensor, param, [(entry.offset, span[0], span[1])]))
            plan.copy_out.append(copy_regions_op(param, entry.tensor, [(span[0], entry.offset, span[1])]))
            host_visible.append(entry.tensor)
        if staged_in and not plan.whole[0]:
            if not held:
                plan.copy_in.append(copy_regions_op(param, param, staged_in, source_staging=True))
            plan.copy_out.append(copy_regions_op(param, param, staged_in, destination_staging=True))
            plan.copy_out.append(host_read_barrier_op([param], staging=True))
        if host_visible:
            plan.copy_out.append(host_read_barrier_op(host_visible))
        staged_grads: list[tuple[int, int, int]] = []
        for i, (slot, entry) in enumerate(zip(slots, grad_imports, strict=False)):
            span = (slot.offset * size, slot.size * size)
            if entry is None:
                plan.staged_grads.append(i)
                staged_grads.append((span[0], span[0], span[1]))
            elif bind_grads and entry.bound and plan.param is not None:  # the update reads it
                plan.grad = entry.tensor
            else:
                plan.copy_in.append(copy_regions_op(entry.tensor, grad, [(entry.offset, span[0], span[1])]))
        if staged_grads and not plan.whole[1]:
            plan.copy_in.append(copy_regions_op(grad, grad, staged_grads, source_staging=True))
        self._plans[key] = plan
        return plan

    def keep_flat_params(self, groups: Sequence[Group]) -> None:
        """From now on keep every NumPy group's flat param buffers current (the application
        took one); bring them up to date if direct steps left them behind. The caller drains
        first."""
        self.stop_direct()
        if not self.used_direct:
            return
        params = [b.param for g in groups if g.host_mode for b in g.sets]
        for group in groups:
            if group.host_mode:
                for k in range(len(group.sets)):
                    slots = [part for _, part in group.parts(k)]
                    gather(slots, [slot.host for slot in slots], group.param_staging[k])
        self.rt.run([self.rt.barrier_op(params), self.rt.upload_op(params)])
        self.used_direct = False

    def hold_params(self) -> None:
        """From now on the device's params are the current ones (``device_params``): a step
        uploads gradients only and copies the updated params into the arrays."""
        self.stop_direct()
        self.held = True

    def stop_direct(self) -> None:
        """No update binds a param's import from now on (the flat buffers stay current)."""
        self.direct = False
        self._plans.clear()

    def close(self) -> None:
        self.back.close()
        self._plans.clear()
        self.copy_in, self.copy_out = [], []
        self.imports.close()
