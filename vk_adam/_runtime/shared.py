"""One Vulkan device per process and device index, shared by every optimizer that opens none.

Opening a device is slow (the timings: BENCHMARKS.md, "Lifecycle") and drivers limit how many a
process may hold (past its limit NVIDIA's aborts the process), so every vk-adam object that needs
a device (optimizers, ``adam_update``, LoRA helpers, ``check_rule``, the demo and the bench) takes
a reference on one shared ``kp.Manager`` per device index.

* **Reference-counted.** :func:`acquire` adds a user, :func:`release` drops one. When the last
  user lets go, the device is closed after ``$VK_ADAM_DEVICE_LINGER`` seconds (default 5; ``0``
  closes it at once), so a loop that builds and closes optimizers keeps one device and its
  pipelines instead of reopening them every time. At interpreter exit every device still open
  is closed (the objects of optimizers never closed are freed first), and then kp's one
  VkInstance of the process.
* **Pipelines are shared** by the patched kp: algorithms of one device with equal SPIR-V,
  specialization constants, push-constant size and binding count use one VkPipeline; a second
  optimizer with the same rule builds only descriptor sets.
* **Sequences are reused.** A closing runtime hands its idle, untimed kp sequences (a command
  pool, buffer and fence each, slow to create and destroy) back to its device
  for the next one (at most :data:`SPARE_SEQUENCES` kept). Freed tensors' memory is reused the
  same way inside the patched kp (``KOMPUTE_MEMORY_RECYCLE_BYTES``).
* **Threads.** The table is guarded by a lock; the patched kp serializes submissions to the
  device's queue, so optimizers on one device may step from different threads (one optimizer
  is not itself thread-safe, as in torch).
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .._errors import NoVulkanDeviceError
from ._kp import kp_module
from .devices import DeviceInfo, select_device

#: Seconds an unused shared device stays open for the next user (default 5; 0: close at once).
LINGER_ENV = "VK_ADAM_DEVICE_LINGER"
_DEFAULT_LINGER_S = 5.0
#: Idle kp sequences a shared device keeps for its next users.
SPARE_SEQUENCES = 32


@dataclass(eq=False)
class SharedDevice:
    """One open device: its kp.Manager, what it is, and who uses it."""

    info: DeviceInfo
    manager: Any
    users: int = 0
    #: Objects that free their Vulkan objects at exit if their owner never closed them.
    closers: weakref.WeakSet[Any] = field(default_factory=weakref.WeakSet)
    _timer: threading.Timer | None = None
    closed: bool = False
    #: Idle, cleared, untimed kp sequences for the next runtime (see :func:`take_sequence`).
    spare_sequences: list[Any] = field(default_factory=list)


_LOCK = threading.RLock()
_DEVICES: dict[int, SharedDevice] = {}


def _linger_seconds() -> float:
    raw = os.environ.get(LINGER_ENV, "")
    if not raw.strip():
        return _DEFAULT_LINGER_S
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"${LINGER_ENV} must be a number of seconds (got {raw!r})") from None
    if not value >= 0:
        raise ValueError(f"${LINGER_ENV} must be >= 0 seconds (got {raw!r})")
    return value


def _open(info: DeviceInfo) -> Any:
    try:
        return kp_module().Manager(info.index)
    except Exception as exc:  # kp raises RuntimeError with the Vulkan result
        raise NoVulkanDeviceError(
            f"could not open Vulkan device {info.index} ({info.name!r}): {exc}. Other processes "
            "or too many open devices can exhaust a driver; `vk-adam info` lists the devices."
        ) from exc


def acquire(device: int | str | None = None) -> SharedDevice:
    """A reference on the shared device for ``device`` (see :func:`select_device`), opened on
    first use. Pair every call with :func:`release`."""
    _linger_seconds()  # a bad setting is refused here, before anything changes
    info = select_device(device)
    with _LOCK:
        shared = _DEVICES.get(info.index)
        if shared is None:
            shared = SharedDevice(info, _open(info))
            _DEVICES[info.index] = shared
        if shared._timer is not None:
            shared._timer.cancel()
            shared._timer = None
        shared.users += 1
        return shared


def release(shared: SharedDevice) -> None:
    """Drop one reference; the last one closes the device (after the linger time)."""
    with _LOCK:
        if shared.closed:
            return
        shared.users -= 1
        if shared.users > 0:
            return
        try:
            linger = _linger_seconds()
        except ValueError:  # changed since acquire() checked it: the default
            linger = _DEFAULT_LINGER_S
        if linger == 0:
            _close(shared)
            return
        timer = threading.Timer(linger, _close_if_unused, args=(shared,))
        timer.daemon = True
        shared._timer = timer
        timer.start()


def register_closer(shared: SharedDevice, owner: Any) -> None:
    """Have ``owner.close()`` run at exit, before the device closes, if it is still alive."""
    shared.closers.add(owner)


def take_sequence(shared: SharedDevice) -> Any | None:
    """An idle, cleared kp sequence (no timestamps) another user gave back, if there is one."""
    with _LOCK:
        return shared.spare_sequences.pop() if shared.spare_sequences and not shared.closed else None


def give_sequence(shared: SharedDevice, sequence: Any) -> bool:
    """Keep an idle kp sequence without timestamps for the next user; False when it should be
    destroyed instead (the device is closed, or enough are kept)."""
    with _LOCK:
        if shared.closed or len(shared.spare_sequences) >= SPARE_SEQUENCES:
            return False
        sequence.clear()
        shared.spare_sequences.append(sequence)
        return True


def _close_if_unused(shared: SharedDevice) -> None:
    with _LOCK:
        if shared.users == 0 and not shared.closed:
            _close(shared)


def _close(shared: SharedDevice) -> None:
    """Destroy the device (the caller holds the lock)."""
    if shared._timer is not None:
        shared._timer.cancel()
        shared._timer = None
    shared.closed = True
    if _DEVICES.get(shared.info.index) is shared:
        del _DEVICES[shared.info.index]
    shared.spare_sequences.clear()  # the manager destroys them with everything it made
    shared.manager.destroy()


def lookup(manager: Any) -> SharedDevice | None:
    """The shared device whose kp.Manager is ``manager``, if it is one."""
    with _LOCK:
        return next((d for d in _DEVICES.values() if d.manager is manager), None)


def open_devices() -> dict[int, int]:
    """Device index -> users, for every shared device open now (users 0: lingering)."""
    with _LOCK:
        return {index: d.users for index, d in _DEVICES.items()}


def close_all() -> None:
    """Close every shared device now, whoever still uses it (the objects of optimizers never
    closed are freed first), then kp's process-wide VkInstance. Runs at interpreter exit."""
    with _LOCK:
        for shared in list(_DEVICES.values()):
            for owner in list(shared.closers):
                try:
                    owner.close()
                except Exception:  # exit must go on
                    pass
            _close(shared)
    _release_instance()


def _release_instance() -> None:
    kp = sys.modules.get("kp")  # never import kp at exit: a process that did not use it is done
    if kp is None:
        return
    release_instance: Callable[[], bool] | None = getattr(kp, "release_instance", None)
    if release_instance is not None:
        release_instance()


atexit.register(close_all)


class DeviceHandle:
    """A reference on the process's shared Vulkan device, for an application's own work.

    ``manager`` is the same ``kp.Manager`` vk-adam's optimizers use on that device: tensors and
    sequences made on it can be handed to them (``manager=``). :meth:`close` (or leaving the
    ``with`` block) drops the reference; the objects made on ``manager`` are the caller's to free.
    """

    def __init__(self, device: int | str | None = None) -> None:
        self._shared: SharedDevice | None = acquire(device)
        #: The shared kp.Manager (None once closed).
        self.manager: Any = self._shared.manager
        #: The device it drives.
        self.info: DeviceInfo = self._shared.info

    def close(self) -> None:
        """Drop this reference (idempotent)."""
        shared, self._shared = self._shared, None
        self.manager = None
        if shared is not None:
            release(shared)

    def __enter__(self) -> DeviceHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._shared is None else f"users={self._shared.users}"
        return f"<DeviceHandle [{self.info.index}] {self.info.name} {state}>"


def open_device(device: int | str | None = None) -> DeviceHandle:
    """The process's shared Vulkan device for ``device`` (index or name substring, else
    ``$VK_ADAM_DEVICE``, else the first hardware GPU, else lavapipe), as a :class:`DeviceHandle`.

    Example::

        with vk_adam.open_device() as dev:
            param = dev.manager.tensor(np.zeros(1024, np.float32))
            opt = vk_adam.AdamW([param], manager=dev.manager)
    """
    return DeviceHandle(device)


def as_manager(manager: Any) -> Any:
    """The ``kp.Manager`` meant by ``manager=``: a :class:`DeviceHandle` stands for its
    shared manager (``vk_adam.open_device()``); anything else is returned for the caller to check."""
    if isinstance(manager, DeviceHandle):
        if manager.manager is None:
            raise ValueError(
                "manager= got a closed DeviceHandle; open the device again (vk_adam.open_device())"
            )
        return manager.manager
    return manager
