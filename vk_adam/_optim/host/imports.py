"""Imports of NumPy arrays' pages on one device (``VK_EXT_external_memory_host``), cached per
array, for ``to_device``'s copies and bound updates (see its module doc for when each array is
imported). An import lives while its array does: a weak reference drops it when the array dies,
and an array found at another address or size drops its old import before a new one is made.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from itertools import count
from typing import Any

import numpy as np

from ..._inputs import env_int
from ..._runtime import free_tensor, import_host_array, import_host_range

#: Arrays smaller than this are copied through staging memory: pinning their pages would cost
#: more than the copy.
MIN_IMPORT_BYTES = 64 * 1024
#: Imports cached per optimizer; the least recently used is dropped first beyond this many.
MAX_IMPORTS = 256
#: ``VK_ADAM_HOST_IMPORT=0`` turns imports off (every array through staging memory).
HOST_IMPORT_ENV = "VK_ADAM_HOST_IMPORT"

_serials = count(1)


@dataclass
class _Entry:
    """One array's import, or the record of having seen it once (``tensor`` None)."""

    ref: weakref.ref[np.ndarray]
    address: int
    nbytes: int
    tensor: Any = None
    offset: int = 0  # the array's first byte in the imported range
    serial: int = 0  # unique per import: keys the cached copy ops that use it
    refused: bool = False  # the driver refused this memory; staging path from now on
    bound: bool = False  # the tensor is exactly the array (a shader can bind it)
    keep: bool = False  # a param's: never dropped to make room


class HostImports:
    """Imports of NumPy arrays' pages on one device, cached per array (see the module doc)."""

    def __init__(self, manager: Any, alignment: int, enabled: bool) -> None:
        self._manager, self._alignment = manager, alignment
        self.enabled = enabled and alignment > 0 and env_int(HOST_IMPORT_ENV, 1, (0, 1)) == 1
        self._entries: OrderedDict[int, _Entry] = OrderedDict()

    def get(
        self, array: np.ndarray, *, at_first_sight: bool, bound: bool = False, keep: bool = False
    ) -> _Entry | None:
        """``array``'s import (made now if needed), or None: take the staging path.
        ``at_first_sight``: import an array seen for the first time (else only the second).
        ``bound``: try an import a shader can bind first. ``keep``: never drop it to make room
        (a param, which the optimizer holds)."""
        if not self.enabled or array.nbytes < MIN_IMPORT_BYTES:
            return None
        if not (array.flags.c_contiguous and array.flags.writeable):
            return None
        key, address = id(array), int(array.__array_interface__["data"][0])
        entry = self._entries.get(key)
        moved = entry is not None and (entry.address, entry.nbytes) != (address, array.nbytes)
        if entry is not None and (entry.ref() is not array or moved):
            self._drop(key)
            entry = None
        if entry is None:
            owner = weakref.ref(self)
            ref = weakref.ref(array, partial(_array_died, owner, key))
            entry = self._entries[key] = _Entry(ref, address, array.nbytes, keep=keep)
            self._make_room()
            if not at_first_sight:
                return None
        self._entries.move_to_end(key)
        if entry.tensor is None and not entry.refused:
            self._import(entry, address, bound and array.dtype == np.float32)
        return entry if entry.tensor is not None else None

    def of_set(
        self, params: Sequence[np.ndarray], grads: Sequence[Any] | None, *, bind_param: bool, bind_grads: bool
    ) -> tuple[list[_Entry | None], list[_Entry | None]]:
        """One buffer set's imports for a step, params first: each param's (:meth:`get` at first
        sight, kept; ``bind_param``: one a shader can bind), and each gradient's (at its second
        sight; ``bind_grads`` likewise; none for what is not a plain ndarray, nor for ``grads``
        None). None where an array takes the staging path."""
        param_imports = [self.get(p, at_first_sight=True, bound=bind_param, keep=True) for p in params]
        grad_imports = (
            [
                self.get(g, at_first_sight=False, bound=bind_grads) if type(g) is np.ndarray else None
                for g in grads
            ]
            if grads is not None
            else []
        )
        return param_imports, grad_imports

    def _import(self, entry: _Entry, address: int, bound: bool) -> None:
        size, manager, alignment = entry.nbytes, self._manager, self._alignment
        if bound:
            try:
                entry.tensor = import_host_array(manager, address, size, alignment)
                entry.bound, entry.serial = True, next(_serials)
                return
            except RuntimeError:
                pass  # e.g. an address the driver cannot bind a buffer at: copies still work
        try:
            entry.tensor, entry.offset = import_host_range(manager, address, size, alignment)
        except RuntimeError:
            entry.refused = True
            return
        entry.serial = next(_serials)

    def _make_room(self) -> None:
        spare = [k for k, e in self._entries.items() if not e.keep]
        for key in spare[: max(0, len(self._entries) - MAX_IMPORTS)]:
            self._drop(key)

    def _drop(self, key: int, ref: weakref.ref[np.ndarray] | None = None) -> None:
        entry = self._entries.get(key)
        if entry is None or (ref is not None and entry.ref is not ref):
            return
        del self._entries[key]
        if entry.tensor is not None:
            free_tensor(entry.tensor)

    def __len__(self) -> int:
        return sum(1 for e in self._entries.values() if e.tensor is not None)

    def close(self) -> None:
        """Drop every import (the caller has waited for the GPU)."""
        entries, self._entries = list(self._entries.values()), OrderedDict()
        for entry in entries:
            if entry.tensor is not None:
                free_tensor(entry.tensor)
        self.enabled = False


def _array_died(owner: weakref.ref[HostImports], key: int, ref: weakref.ref[np.ndarray]) -> None:
    imports = owner()
    if imports is not None:
        imports._drop(key, ref)
