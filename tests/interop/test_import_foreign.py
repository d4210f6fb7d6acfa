"""Importing memory that an application other than vk-adam exported (issue #42 items 4 and 5):
metadata built from the exporter's facts (``interop.foreign_metadata``), UUIDs in any usual
spelling, the fd left with the caller whatever happens, and refusals that say what was checked.
(tests/interop/test_raw_vulkan_import.py runs the raw-Vulkan example.)"""

from __future__ import annotations

import os
import uuid

import numpy as np
import pytest

kp = pytest.importorskip("kp")

from vk_adam import interop  # noqa: E402
from vk_adam._runtime import external  # noqa: E402

pytestmark = pytest.mark.skipif(not external.supported(), reason="kp without vk-adam's patch 0017 (stock kp)")


@pytest.fixture()
def two_devices():
    a, b = kp.Manager(), kp.Manager()
    yield a, b
    b.destroy()
    a.destroy()


def _download(mgr: object, tensor: object) -> np.ndarray:
    mgr.sequence().eval(kp.OpTensorSyncLocal([tensor]))  # type: ignore[attr-defined]
    return np.array(tensor.data())  # type: ignore[attr-defined]


@pytest.fixture()
def exported(two_devices, rng):
    """An export of 256 random float32 on device a, and its values."""
    a, b = two_devices
    values = rng.standard_normal(256).astype(np.float32)
    ext = interop.export_memory(interop.exportable_tensor(a, values))
    yield ext, values, b
    ext.close()


def test_foreign_metadata_from_the_exporters_facts_is_what_vk_adams_export_says(exported):
    ext, values, b = exported
    meta = ext.metadata()
    built = interop.foreign_metadata(
        ext.fd,
        shape=(256,),
        dtype="float32",
        allocation_size=meta["allocation_size"],
        memory_type_index=meta["memory_type_index"],
        device_uuid=bytes.fromhex(meta["device_uuid"]),  # as Vulkan holds it: 16 bytes
        driver_uuid=list(bytes.fromhex(meta["driver_uuid"])),  # or any iterable of 16 ints
    )
    assert built == meta
    np.testing.assert_array_equal(_download(b, interop.import_memory(ext.fd, built, manager=b)), values)


def test_a_uuid_in_any_usual_spelling_is_the_same_device(exported):
    ext, values, b = exported
    meta = ext.metadata()
    canonical = meta["device_uuid"]
    dashed = str(uuid.UUID(canonical))
    for spelling in (canonical.upper(), dashed, dashed.upper(), "{" + dashed + "}", f"urn:uuid:{dashed}"):
        other = {**meta, "device_uuid": spelling, "driver_uuid": meta["driver_uuid"].upper()}
        tensor = interop.import_memory(ext.fd, other, manager=b)
        np.testing.assert_array_equal(_download(b, tensor), values)
        tensor.destroy()
    # A different UUID is still another GPU, whatever its spelling.
    with pytest.raises(ValueError, match=f"another GPU.*deviceUUID {canonical}"):
        interop.import_memory(
            ext.fd, {**meta, "device_uuid": dashed.replace("-", "").upper()[:-1] + "F"}, manager=b
        )
    with pytest.raises(ValueError, match=r"'mesa' is not a UUID: give 32 hex digits"):
        interop.import_memory(ext.fd, {**meta, "device_uuid": "mesa"}, manager=b)
    with pytest.raises(ValueError, match="holds 15 bytes; a Vulkan UUID has 16"):
        interop.foreign_metadata(
            ext.fd, shape=256, allocation_size=1024, memory_type_index=0, device_uuid=bytes(15)
        )


def test_metadata_that_lacks_fields_points_at_foreign_metadata(exported):
    ext, _values, b = exported
    with pytest.raises(ValueError, match=r"lacks \[.*'fd_identity'\].*interop\.foreign_metadata\(fd"):
        interop.import_memory(ext.fd, {"version": 1, "size": 1024, "dtype": "float32"}, manager=b)


def test_a_failed_import_leaves_the_callers_fd_open_and_says_what_was_checked(exported):
    """allocation_size 4096 bytes too large: refused before the driver (an allocation size other
    than the buffer's memory requirements is invalid Vulkan), naming the size it should be."""
    ext, values, b = exported
    meta = ext.metadata()
    before = os.fstat(ext.fd)
    with pytest.raises(ValueError) as too_large:
        interop.import_memory(ext.fd, {**meta, "allocation_size": meta["allocation_size"] + 4096}, manager=b)
    message = str(too_large.value)
    assert f"allocation_size {meta['allocation_size'] + 4096} does not match" in message
    assert f"VkMemoryRequirements::size: {meta['allocation_size']} bytes" in message
    assert f"memory_type_index {meta['memory_type_index']} is one the buffer can use" in message
    assert f"Your fd {ext.fd} is still open" in message
    after = os.fstat(ext.fd)  # open, and the same file
    assert (after.st_dev, after.st_ino) == (before.st_dev, before.st_ino)

    with pytest.raises(
        ValueError,
        match=r"memory_type_index 31 cannot back a 1024-byte storage buffer.*"
        r"vkGetMemoryFdPropertiesKHR does not take opaque fds.*still open",
    ):
        interop.import_memory(ext.fd, {**meta, "memory_type_index": 31}, manager=b)
    with pytest.raises(ValueError, match="memory_type_index 32 is not a Vulkan memory type index"):
        interop.import_memory(ext.fd, {**meta, "memory_type_index": 32}, manager=b)
    # The same fd then imports: nothing was taken from it.
    np.testing.assert_array_equal(_download(b, interop.import_memory(ext.fd, meta, manager=b)), values)
    assert os.fstat(ext.fd).st_ino == before.st_ino


def test_the_callers_fd_stays_theirs_after_a_successful_import(two_devices, rng):
    a, b = two_devices
    values = rng.standard_normal(64).astype(np.float32)
    ext = interop.export_memory(interop.exportable_tensor(a, values))
    meta = ext.metadata()
    first = interop.import_memory(ext.fd, meta, manager=b)
    second = interop.import_memory(ext.fd, meta, manager=b)  # the same fd, again
    assert not ext.closed
    ext.close()  # the caller closes its fd; the imports hold the memory
    np.testing.assert_array_equal(_download(b, first), values)
    np.testing.assert_array_equal(_download(b, second), values)


class _Driver:
    """A kp.Manager stand-in whose import fails at the driver, after kp's own checks passed
    (kp names the size it needs when asked to import 0 bytes). ``closes``: like Mesa, the
    driver closes the fd it was given on that failure."""

    def __init__(self, *, closes: bool) -> None:
        self.closes = closes
        self.given: list[int] = []
        self.reused: int | None = None

    def tensor_import_fd(self, fd: int, size: int, memory_type: int, elements: int, dtype: str) -> object:
        if size == 0:
            raise RuntimeError(
                f"the exported allocation (0 bytes) is smaller than this buffer needs ({4 * elements} bytes)"
            )
        self.given.append(fd)
        if self.closes:
            os.close(fd)
            self.reused = os.open(os.devnull, os.O_RDONLY)  # an unrelated file takes the number
        raise RuntimeError("vkAllocateMemory (opaque fd import) failed: ErrorOutOfDeviceMemory")


@pytest.mark.parametrize("closes", [True, False], ids=["driver-closes-the-fd", "driver-keeps-it"])
def test_a_driver_failure_closes_only_vk_adams_dup(closes):
    """The caller's fd is never the one the driver gets. Where the driver closes what it got and
    an unrelated file reuses that number (Mesa's behaviour, then any open), vk-adam leaves that
    file alone; where it keeps it (the spec's), vk-adam closes its dup: no fd leaks."""
    read_end, write_end = os.pipe()
    before = len(os.listdir("/proc/self/fd"))
    driver = _Driver(closes=closes)
    try:
        with pytest.raises(RuntimeError) as failed:
            external.import_fd(driver, read_end, 1024, 0, 256, "float32")
        message = str(failed.value)
        assert "vkAllocateMemory (opaque fd import) failed: ErrorOutOfDeviceMemory" in message
        assert "allocation_size 1024 equals the memory requirements of this 1024-byte buffer" in message
        assert "memory_type_index must be the exporter's own VkMemoryAllocateInfo::memoryTypeIndex" in message
        assert f"Your fd {read_end} is still open, and yours" in message
        assert driver.given and driver.given[0] != read_end  # the driver got a dup
        os.write(write_end, b"x")
        assert os.read(read_end, 1) == b"x"  # the caller's fd works
        if closes:
            assert driver.reused == driver.given[0]
            os.fstat(driver.reused)  # the unrelated file that took the number is still open
            os.close(driver.reused)
        assert len(os.listdir("/proc/self/fd")) == before
    finally:
        os.close(read_end)
        os.close(write_end)
