"""The few CUDA driver API calls that put a Vulkan allocation under a CUDA pointer, through ctypes
on ``libcuda.so.1``.

Why ctypes and not NVIDIA's ``cuda-python`` (``cuda.bindings.driver``): the calls are a few, with
plain structs; ``libcuda.so.1`` is on every machine that has an NVIDIA driver, while
cuda-python is a separate package whose version must match the driver's CUDA. So nothing is
added to vk-adam's dependencies, and the library is loaded only when a caller asks for a CUDA
view (``vk_adam.interop.as_torch``), never at ``import vk_adam``.

What the calls do (CUDA driver API, "External Resource Interoperability"):

* ``cuImportExternalMemory``: an opaque fd of a Vulkan dedicated allocation becomes a CUDA
  external memory object. The whole allocation is imported (its ``VkMemoryRequirements.size``,
  which is what Vulkan exported), with ``CUDA_EXTERNAL_MEMORY_DEDICATED``. On success CUDA owns
  the fd; on failure it stays the caller's, who closes it.
* ``cuExternalMemoryGetMappedBuffer``: a device pointer over all of it (the buffer is bound at
  the allocation's start; a view covers its first bytes). Freed with ``cuMemFree`` before the
  external memory object is destroyed.

``cuImportExternalSemaphore`` and ``cuSignalExternalSemaphoresAsync`` /
``cuWaitExternalSemaphoresAsync`` do the same for a Vulkan timeline semaphore: a CUDA stream
waits for a value Vulkan's submission signals, and signals one Vulkan's next submission waits
for, with no host wait in between.

Calls run with the device's primary context current (the one torch uses), pushed and popped
around each call so the caller's current context is left as it was.
"""

from __future__ import annotations

import ctypes
import threading
from dataclasses import dataclass
from typing import Any

#: CUexternalMemoryHandleType
_OPAQUE_FD = 1
#: CUexternalSemaphoreHandleType: a Vulkan timeline semaphore's opaque fd
_TIMELINE_SEMAPHORE_FD = 9
#: CUDA_EXTERNAL_MEMORY_DEDICATED
_DEDICATED = 1


class _Handle(ctypes.Union):
    """The handle union of CUDA_EXTERNAL_MEMORY_HANDLE_DESC (two pointers wide: win32's)."""

    _fields_ = (("fd", ctypes.c_int), ("win32", ctypes.c_void_p * 2))


class _HandleDesc(ctypes.Structure):
    """CUDA_EXTERNAL_MEMORY_HANDLE_DESC."""

    _fields_ = (
        ("type", ctypes.c_int),
        ("handle", _Handle),
        ("size", ctypes.c_ulonglong),
        ("flags", ctypes.c_uint),
        ("reserved", ctypes.c_uint * 16),
    )


class _BufferDesc(ctypes.Structure):
    """CUDA_EXTERNAL_MEMORY_BUFFER_DESC."""

    _fields_ = (
        ("offset", ctypes.c_ulonglong),
        ("size", ctypes.c_ulonglong),
        ("flags", ctypes.c_uint),
        ("reserved", ctypes.c_uint * 16),
    )


class _SemaphoreDesc(ctypes.Structure):
    """CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC."""

    _fields_ = (
        ("type", ctypes.c_int),
        ("handle", _Handle),
        ("flags", ctypes.c_uint),
        ("reserved", ctypes.c_uint * 16),
    )


class _SemaphoreParams(ctypes.Structure):
    """CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS and _WAIT_PARAMS, which share this layout: a
    timeline semaphore's value first; the rest (NvSciSync, keyed mutex) stays zero."""

    _fields_ = (
        ("value", ctypes.c_ulonglong),
        ("other", ctypes.c_ubyte * 64),
        ("flags", ctypes.c_uint),
        ("reserved", ctypes.c_uint * 16),
    )


def _handle_desc(fd: int, size: int) -> _HandleDesc:
    desc = _HandleDesc(type=_OPAQUE_FD, size=size, flags=_DEDICATED)
    desc.handle.fd = fd
    return desc


# The C structs' sizes on x86-64 and aarch64 Linux.
assert ctypes.sizeof(_HandleDesc) == 104 and ctypes.sizeof(_BufferDesc) == 88
assert _HandleDesc.handle.offset == 8 and _HandleDesc.size.offset == 24
assert ctypes.sizeof(_SemaphoreDesc) == 96 and _SemaphoreDesc.flags.offset == 24
assert ctypes.sizeof(_SemaphoreParams) == 144 and _SemaphoreParams.flags.offset == 72


class CudaError(RuntimeError):
    """A CUDA driver call failed (its name and CUDA's message are in the text)."""


@dataclass(frozen=True)
class CudaDevice:
    """A CUDA device: its ordinal and UUID (hex, 32 digits, as Vulkan's deviceUUID)."""

    ordinal: int
    uuid: str
    name: str


class Driver:
    """``libcuda.so.1``, initialised. Use :func:`driver`."""

    def __init__(self) -> None:
        try:
            self._lib = ctypes.CDLL("libcuda.so.1")
        except OSError as exc:
            raise RuntimeError(
                "a CUDA view needs NVIDIA's driver (libcuda.so.1 was not found): this machine has no "
                "CUDA, so share the buffer with another Vulkan device instead (interop.export_memory)"
            ) from exc
        self._lock = threading.Lock()
        self._check(self._lib.cuInit(0), "cuInit")

    def _check(self, result: int, call: str) -> None:
        if result == 0:
            return
        name, text = ctypes.c_char_p(), ctypes.c_char_p()
        self._lib.cuGetErrorName(result, ctypes.byref(name))
        self._lib.cuGetErrorString(result, ctypes.byref(text))
        label = (name.value or b"").decode() or f"error {result}"
        raise CudaError(f"{call} failed: {label} ({(text.value or b'').decode()})")

    def devices(self) -> list[CudaDevice]:
        count = ctypes.c_int()
        self._check(self._lib.cuDeviceGetCount(ctypes.byref(count)), "cuDeviceGetCount")
        found = []
        for ordinal in range(count.value):
            dev = ctypes.c_int()
            self._check(self._lib.cuDeviceGet(ctypes.byref(dev), ordinal), "cuDeviceGet")
            uuid = (ctypes.c_ubyte * 16)()
            get_uuid = getattr(self._lib, "cuDeviceGetUuid_v2", None) or self._lib.cuDeviceGetUuid
            self._check(get_uuid(uuid, dev), "cuDeviceGetUuid")
            name = ctypes.create_string_buffer(256)
            self._check(self._lib.cuDeviceGetName(name, 256, dev), "cuDeviceGetName")
            found.append(CudaDevice(ordinal, bytes(uuid).hex(), name.value.decode(errors="replace")))
        return found

    def _push(self, ordinal: int) -> int:
        """Retain and push ``ordinal``'s primary context; returns the CUdevice for :meth:`_pop`."""
        dev, ctx = ctypes.c_int(), ctypes.c_void_p()
        self._check(self._lib.cuDeviceGet(ctypes.byref(dev), ordinal), "cuDeviceGet")
        self._check(self._lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
        result = self._lib.cuCtxPushCurrent_v2(ctx)
        if result != 0:
            self._lib.cuDevicePrimaryCtxRelease_v2(dev)
            self._check(result, "cuCtxPushCurrent")
        return dev.value

    def _pop(self, dev: int, releases: int = 1) -> None:
        """Pop the context :meth:`_push` pushed and release the primary context ``releases``
        times (0: the caller keeps the retain)."""
        ctx = ctypes.c_void_p()
        self._lib.cuCtxPopCurrent_v2(ctypes.byref(ctx))
        for _ in range(releases):
            self._lib.cuDevicePrimaryCtxRelease_v2(ctypes.c_int(dev))

    def import_fd(self, ordinal: int, fd: int, allocation_size: int) -> tuple[int, int]:
        """(external memory handle, device pointer) over the whole dedicated allocation ``fd``
        exports (``allocation_size`` bytes: mapping a size that is not the allocation's
        alignment makes CUDA's copies of it fail). CUDA owns ``fd`` once this returns; on an
        error nothing is imported and the fd is still the caller's.

        The mapping lives in the device's primary context, so it keeps one retain of that
        context until :meth:`release`: were it the only user (torch creates its context
        lazily), releasing it here would destroy the context and the mapping with it."""
        with self._lock:
            dev = self._push(ordinal)
            kept = False
            try:
                memory = ctypes.c_void_p()
                desc = _handle_desc(fd, allocation_size)
                self._check(
                    self._lib.cuImportExternalMemory(ctypes.byref(memory), ctypes.byref(desc)),
                    "cuImportExternalMemory",
                )
                pointer = ctypes.c_ulonglong()
                buffer = _BufferDesc(0, allocation_size, 0)
                result = self._lib.cuExternalMemoryGetMappedBuffer(
                    ctypes.byref(pointer), memory, ctypes.byref(buffer)
                )
                if result != 0:
                    self._lib.cuDestroyExternalMemory(memory)  # the fd went with it (CUDA's now)
                    self._check(result, "cuExternalMemoryGetMappedBuffer")
                kept = True
                return int(memory.value or 0), int(pointer.value)
            finally:
                self._pop(dev, releases=0 if kept else 1)

    def release(self, ordinal: int, memory: int, pointer: int) -> None:
        """Free a mapped buffer and destroy its external memory object; release the primary
        context's retain :meth:`import_fd` kept."""
        with self._lock:
            dev = self._push(ordinal)
            try:
                self._check(self._lib.cuMemFree_v2(ctypes.c_ulonglong(pointer)), "cuMemFree")
                destroyed = self._lib.cuDestroyExternalMemory(ctypes.c_void_p(memory))
                self._check(destroyed, "cuDestroyExternalMemory")
            finally:
                self._pop(dev, releases=2)

    def import_semaphore(self, ordinal: int, fd: int) -> int:
        """A CUDA external semaphore over a Vulkan timeline semaphore's opaque ``fd``
        (``cuImportExternalSemaphore``). CUDA owns ``fd`` once this returns; on an error it is
        still the caller's."""
        with self._lock:
            dev = self._push(ordinal)
            try:
                semaphore = ctypes.c_void_p()
                desc = _SemaphoreDesc(type=_TIMELINE_SEMAPHORE_FD)
                desc.handle.fd = fd
                got = self._lib.cuImportExternalSemaphore(ctypes.byref(semaphore), ctypes.byref(desc))
                self._check(got, "cuImportExternalSemaphore")
                return int(semaphore.value or 0)
            finally:
                self._pop(dev)

    def semaphore_async(self, ordinal: int, semaphore: int, value: int, stream: int, *, signal: bool) -> None:
        """Enqueue on ``stream`` (a CUstream; 0: the legacy default stream) a wait until the
        imported timeline ``semaphore`` reaches ``value``, or (``signal``) its signal to
        ``value`` once the stream's earlier work is done."""
        call = "cuSignalExternalSemaphoresAsync" if signal else "cuWaitExternalSemaphoresAsync"
        params = _SemaphoreParams(value=value)
        handle = ctypes.c_void_p(semaphore)
        with self._lock:
            dev = self._push(ordinal)
            try:
                got = getattr(self._lib, call)(
                    ctypes.byref(handle), ctypes.byref(params), 1, ctypes.c_void_p(stream)
                )
                self._check(got, call)
            finally:
                self._pop(dev)

    def destroy_semaphore(self, ordinal: int, semaphore: int) -> None:
        """Destroy a semaphore :meth:`import_semaphore` made."""
        with self._lock:
            dev = self._push(ordinal)
            try:
                got = self._lib.cuDestroyExternalSemaphore(ctypes.c_void_p(semaphore))
                self._check(got, "cuDestroyExternalSemaphore")
            finally:
                self._pop(dev)


_DRIVER: Driver | None = None


def driver() -> Driver:
    """The process's :class:`Driver` (loaded and initialised on first use)."""
    global _DRIVER
    if _DRIVER is None:
        _DRIVER = Driver()
    return _DRIVER


def device_for_uuid(uuid: str) -> CudaDevice:
    """The CUDA device whose UUID is Vulkan's ``deviceUUID`` ``uuid``; ValueError naming every
    UUID when none is (another GPU, or one hidden by ``CUDA_VISIBLE_DEVICES``)."""
    devices = driver().devices()
    for device in devices:
        if device.uuid == uuid:
            return device
    seen = ", ".join(f"{d.ordinal}: {d.name} {d.uuid}" for d in devices) or "none"
    raise ValueError(
        f"no CUDA device has this Vulkan device's deviceUUID {uuid} (CUDA devices: {seen}); a CUDA "
        "view needs the same GPU under both APIs: check CUDA_VISIBLE_DEVICES and the Vulkan device"
    )


def _free_quietly(ordinal: int, memory: int, pointer: int) -> None:
    try:
        driver().release(ordinal, memory, pointer)
    except Exception:  # at interpreter exit the driver may already be gone
        pass


class CudaMapping:
    """A CUDA device pointer over a Vulkan allocation (what ``torch.as_tensor`` wraps through
    ``__cuda_array_interface__``); the mapping is freed when the last object holding it dies.
    ``owner`` (the Vulkan tensor) is kept alive as long as the mapping."""

    def __init__(
        self, device: CudaDevice, fd: int, allocation_size: int, nbytes: int, typestr: str, owner: Any
    ) -> None:
        self.device, self.nbytes, self.owner = device, nbytes, owner
        self.memory, self.pointer = driver().import_fd(device.ordinal, fd, allocation_size)
        self._typestr = typestr

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        itemsize = int(self._typestr[2:])
        return {
            "shape": (self.nbytes // itemsize,),
            "typestr": self._typestr,
            "data": (self.pointer, False),
            "version": 3,
            "strides": None,
            "stream": None,  # the hand-over functions order the two APIs; no stream to wait on
        }

    def __del__(self) -> None:
        if getattr(self, "pointer", None):
            _free_quietly(self.device.ordinal, self.memory, self.pointer)
            self.pointer = 0


__all__ = ["CudaDevice", "CudaError", "CudaMapping", "Driver", "device_for_uuid", "driver"]
