"""A param group's buffers on the device: the buffer sets (param, grad, state, and what the
storage formats add) made for each group of params, and the compiled shaders they run.

Split from ``device`` (which binds pipelines and builds the ops of a step) so that each file
reads in one sitting; ``storage`` decides the formats and contents, this module makes them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from .. import _formats as fmt
from .._errors import DeviceCapabilityError, ShaderMissingError
from .._rules import ShaderVariant, UpdateRule, load_spirv
from .._runtime import Runtime, device_of, element_count, host_view, is_kp_tensor, max_elements
from .groups import shader_spec
from .layout import ALIGN_ELEMENTS, ParamSlot, align, plan_sets
from .storage import (
    GroupFormat,
    Storage,
    Window,
    group_format,
    initial_state,
    param_words,
    typed_view,
    value_words,
)
from .windows import Chunk, chunks

F32 = npt.NDArray[np.float32]


@dataclass
class BufferSet:
    """One dispatch's buffers: param, grad, state; ``n`` elements each."""

    param: Any
    grad: Any
    state: dict[str, Any]
    n: int
    index: int  # position among all of the optimizer's buffer sets
    format: GroupFormat = field(default_factory=GroupFormat)
    window: Window | None = None  # a slice of a larger buffer set (storage.Window)
    absmax: dict[str, Any] = field(default_factory=dict)  # per 8-bit state buffer
    master: Any = None  # fp32 master copy of 16-bit params
    # The elements each dispatch updates: one chunk, unless the set is larger than one binding
    # may span on this device (windows.py); ``slot``: the set's first chunk among all of the
    # optimizer's (clipping's partial sums), set by the device side.
    chunks: list[Chunk] = field(default_factory=list)
    slot: int = 0
    update_algos: list[Any] = field(default_factory=list)  # one per chunk
    check_ops: list[Any] = field(
        default_factory=list
    )  # pre-pass dispatches (non-finite check or clipping pass 1): constant
    bound_grad: Any = None  # the grad tensor the current algorithms are bound to
    bound_param: Any = None  # and the param tensor: ``param``, or a host array's import
    spirv: str = ""  # the update shader the newest pipeline runs (a name or path; variants.py)
    spec: tuple[float, ...] = ()  # its specialization constants
    # id(grad tensor), or (id(param), id(grad)) for another param tensor -> (grad tensor, update
    # algorithm, pre-pass algorithm or None, its op)
    pipelines: dict[Any, tuple[Any, Any, Any, Any]] = field(default_factory=dict)
    # keys of pipelines a record_step used: never evicted
    recorded: set[Any] = field(default_factory=set)
    # The push-constant words of each chunk's next dispatch, refilled each step: kp copies them
    # when the dispatch op is made, so one array per chunk serves every step.
    pushes: list[F32] = field(default_factory=list)
    push_rng: bool = False  # the push constants end with the stochastic-rounding key


@dataclass
class Group:
    """One param group: its options (the user-visible dict), shader, slots and buffer sets."""

    options: dict[str, Any]
    variant: ShaderVariant
    spec: tuple[float, ...]
    slots: list[ParamSlot]
    sets: list[BufferSet]
    host_mode: bool
    step: int = 0
    param_staging: list[F32] = field(default_factory=list)
    grad_staging: list[F32] = field(default_factory=list)
    validated: dict[str, Any] | None = None  # options as last validated (skip re-checks)
    param_dtype: str = "float32"

    _parts: list[list[tuple[int, ParamSlot]]] | None = None  # parts(), made at first use

    def parts(self, index: int) -> list[tuple[int, ParamSlot]]:
        """(param index, slot) of what lives in buffer set ``index``, in order: a NumPy group
        larger than one device allocation spreads its params over several sets, and a param
        larger than one set is cut into pieces (``layout.plan_sets``), one in each of its sets."""
        if self._parts is None:
            self._parts = [[] for _ in self.sets]
            for i, slot in enumerate(self.slots):
                for part in slot.parts():
                    self._parts[part.buffer_set].append((i, part))
        return self._parts[index]


class GroupBuilder:
    """Makes each group's buffer sets on ``rt`` in ``storage``'s formats; caches shaders."""

    def __init__(self, rt: Runtime, rule: UpdateRule, zero_grad: bool, storage: Storage) -> None:
        self.rt, self.rule, self.zero_grad, self.storage = rt, rule, zero_grad, storage
        self._spirv: dict[str, bytes] = {}
        self._sets = 0
        self._groups = 0

    def add_group(self, options: dict[str, Any]) -> Group:
        variant = self.rule.variant_for(options)
        spec = shader_spec(self.rule, options, self.zero_grad)
        params = options["params"]
        host_mode = not is_kp_tensor(params[0])
        if any(is_kp_tensor(p) == host_mode for p in params):
            raise TypeError("a param group must hold either NumPy arrays or kp tensors, not both")
        group = Group(options, variant, spec, [], [], host_mode)
        windows = self.storage.windows
        window = windows[self._groups] if windows else None
        self._groups += 1
        if window is not None and not host_mode and len(params) != 1:
            raise TypeError("a windowed param group of kp tensors (a shard of a larger buffer) holds one")
        if host_mode:
            group.param_dtype = fmt.dtype_name(params[0].dtype) or "float32"
            quantized = self.storage.state_dtype == "int8-blockwise"
            # 8-bit state: each param starts on a block, so no block (absmax) spans two params.
            alignment = fmt.BLOCK if quantized else None
            n_all = sum(align(p.size, alignment or ALIGN_ELEMENTS) for p in params)
            # One format for the whole group (8-bit state from the group's size, not a set's).
            form = self._format(variant, group.param_dtype, window.total if window else n_all)
            group.slots, totals = plan_sets(params, self._set_capacity(form), alignment)
            set_windows = [window] * len(totals)
            if window is not None and len(totals) > 1:
                if len(params) != 1:
                    raise DeviceCapabilityError(
                        f"a windowed param group of {n_all} elements in {len(params)} arrays is larger "
                        f"than one of the device's allocations (maxMemoryAllocationSize "
                        f"{self.rt.facts.max_allocation_bytes} bytes): pass it as one array"
                    )
                # a shard (one array) in pieces: each piece's set is the window from its first element
                set_windows = [
                    Window(window.index, window.offset + piece.start, window.total)
                    for piece in group.slots[0].parts()
                ]
            for k, total in enumerate(totals):
                parts = [part for slot in group.slots for part in slot.parts() if part.buffer_set == k]
                words = param_words(parts, total, form.param)
                param = self._buffer(words)
                # each transient host array is freed before the next buffer is made: the host
                # holds one buffer's words at a time besides the buffers themselves
                master = None
                if form.has_master:
                    fp32 = typed_view(words, form.param)[:total].astype(np.float32)
                    master = self._buffer(value_words(fp32, "float32"), staged=False)
                    del fp32
                shape, dtype = words.shape, words.dtype
                del words
                bset = BufferSet(
                    param,
                    self._buffer(np.zeros(shape, dtype)),  # kp copies zero pages no one wrote
                    {},
                    total,
                    self._next_index(),
                    form,
                    window=set_windows[k],
                    chunks=self._chunks(total),
                )
                bset.master = master
                self._new_state(variant, bset)
                group.sets.append(bset)
                group.param_staging.append(typed_view(host_view(bset.param), form.param))
                group.grad_staging.append(typed_view(host_view(bset.grad), form.param))
        else:
            for index, p in enumerate(params):
                n = element_count(p)
                if n > max_elements():
                    raise ValueError(f"kp tensor {index} holds {n} elements; at most {max_elements()}")
                if device_of(p) not in (None, device_of(self.rt.manager)):
                    raise ValueError(
                        f"kp tensor param {index} belongs to another Vulkan device (another kp.Manager) "
                        "than manager=: pass the Manager that created it as manager="
                    )
                if self.rt.has_host_copy(p) and host_view(p).dtype != np.float32:
                    raise TypeError(f"kp tensor param {index} is {host_view(p).dtype}; vk-adam needs float32")
                grad = self._buffer(np.zeros(n, np.float32))
                group.slots.append(ParamSlot(index, 0, n, (n,), None))
                form = self._format(variant, "float32", window.total if window else n)
                bset = BufferSet(
                    p, grad, {}, n, self._next_index(), form, window=window, chunks=self._chunks(n)
                )
                self._new_state(variant, bset)
                group.sets.append(bset)
        return group

    def _buffer(self, data: npt.NDArray[Any], *, staged: bool = True) -> Any:
        """A buffer of a buffer set: exportable when the optimizer was made ``exportable``;
        ``staged=False`` for what only checkpoints move between host and device (the state, the
        master copy): no host staging copy, where the runtime can (``Runtime.buffer``)."""
        return self.rt.buffer(data, exportable=self.storage.exportable, staged=staged)

    def _chunks(self, n: int) -> list[Chunk]:
        """The dispatches of an ``n``-element buffer set: its bindings within the device's limits."""
        return chunks(n, self.rt.facts.max_binding_bytes, self.rt.facts.binding_alignment)

    def _set_capacity(self, form: GroupFormat) -> int:
        """The most elements one buffer set of a NumPy group in format ``form`` may hold: its
        widest buffer (4 bytes per element: float32 state or master copy, else the 16-bit
        param) within one of the device's allocations, in whole blocks, and within kp's sizes."""
        wide = form.param == "float32" or form.has_master or fmt.STATE_F32 in form.state
        per_element = 4 if wide else 2
        granule = max(fmt.BLOCK, ALIGN_ELEMENTS)
        return min(self.rt.facts.max_allocation_bytes // per_element, max_elements()) // granule * granule

    def _next_index(self) -> int:
        self._sets += 1
        return self._sets - 1

    def _format(self, variant: ShaderVariant, param_dtype: str, n: int) -> GroupFormat:
        """The storage format of a buffer set of ``n`` elements (every shader the rule checks
        accept runs every format)."""
        st = self.storage
        return group_format(variant.state, param_dtype, st.state_dtype, st.stochastic_rounding, n)

    def _new_state(self, variant: ShaderVariant, bset: BufferSet) -> None:
        for s, code in zip(variant.state, bset.format.state, strict=True):
            words, absmax = initial_state(code, s, bset.n)
            bset.state[s.name] = self._buffer(words, staged=False)
            if absmax is not None:
                bset.absmax[s.name] = self._buffer(absmax, staged=False)

    def shader(self, name: str) -> bytes:
        if name not in self._spirv:
            self._spirv[name] = load_spirv(name)
        return self._spirv[name]

    def has_shader(self, name: str) -> bool:
        """Whether the compiled shader ``name`` (a built-in name or a ``.spv`` path) exists."""
        try:
            self.shader(name)
        except ShaderMissingError:
            return False
        return True

    # -- pipelines -----------------------------------------------------------------------------
