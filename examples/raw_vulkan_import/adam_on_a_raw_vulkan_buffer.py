"""A Vulkan application that is not vk-adam and not Kompute hands vk-adam two of its own buffers,
the weights and their gradients, and vk-adam steps Adam on them in place, with no copy.

    pip install vulkan          # the cffi binding this application is written with
    python examples/raw_vulkan_import/adam_on_a_raw_vulkan_buffer.py [--steps 5] [--validate]

The application (``RawVulkanApp``) makes its own VkInstance and VkDevice with the ``vulkan``
package, on the physical device vk-adam uses (the same deviceUUID), and two buffers that it can
export: each a dedicated allocation, exportable as an opaque fd, with the usage vk-adam's
buffers have. It hands each fd to vk-adam with ``interop.foreign_metadata`` (the exporter's
facts) and ``interop.import_memory``. Then, each step:

1. the application writes a gradient into its buffer and waits for its queue (a fence);
2. ``opt.step`` updates the weights on vk-adam's device and returns when that is done;
3. the application reads the weights back through its own device (a fence again) and compares
   them with Adam computed in NumPy.

``--validate`` turns on the Khronos validation layer (core and synchronization) for the
application's instance and counts what it reports; the process exits 1 on any message or
mismatch.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

import numpy as np
import vulkan as vk

import vk_adam
from vk_adam import interop

LAYER = "VK_LAYER_KHRONOS_validation"
#: The usage of every buffer vk-adam imports: the exporter's buffer must have the same.
USAGE = (
    vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT
    | vk.VK_BUFFER_USAGE_TRANSFER_SRC_BIT
    | vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT
)
OPAQUE_FD = vk.VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT


class RawVulkanApp:
    """An application's own Vulkan objects: instance, device, one queue, exportable buffers."""

    def __init__(self, device_uuid: str, *, validate: bool) -> None:
        self.messages: list[str] = []
        self.layer_active = False
        self._destroy: list[Any] = []
        layers = [LAYER] if validate else []
        if validate and LAYER not in [p.layerName for p in vk.vkEnumerateInstanceLayerProperties()]:
            raise SystemExit(
                f"--validate: {LAYER} is not installed (apt-get install vulkan-validationlayers)"
            )
        extensions = ["VK_EXT_debug_utils"] if validate else []
        messenger = vk.VkDebugUtilsMessengerCreateInfoEXT(
            messageSeverity=vk.VK_DEBUG_UTILS_MESSAGE_SEVERITY_INFO_BIT_EXT
            | vk.VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT
            | vk.VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT,
            messageType=vk.VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT
            | vk.VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT
            | vk.VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT,
            pfnUserCallback=self._on_message,
        )
        features = vk.VkValidationFeaturesEXT(  # chained: messages of vkCreateInstance itself too
            pNext=messenger,
            pEnabledValidationFeatures=[vk.VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT],
        )
        app = vk.VkApplicationInfo(
            pApplicationName="raw-vulkan-app",
            applicationVersion=1,
            pEngineName="none",
            engineVersion=1,
            apiVersion=vk.VK_MAKE_VERSION(1, 1, 0),  # external memory and dedicated allocations are core
        )
        self.instance = vk.vkCreateInstance(
            vk.VkInstanceCreateInfo(
                pNext=features if validate else None,
                pApplicationInfo=app,
                ppEnabledLayerNames=layers,
                ppEnabledExtensionNames=extensions,
            ),
            None,
        )
        self.messenger = None
        if validate:
            create = vk.vkGetInstanceProcAddr(self.instance, "vkCreateDebugUtilsMessengerEXT")
            self.messenger = create(self.instance, messenger, None)
        self.physical = self._physical_device(device_uuid)
        family = next(
            i
            for i, f in enumerate(vk.vkGetPhysicalDeviceQueueFamilyProperties(self.physical))
            if f.queueFlags & vk.VK_QUEUE_TRANSFER_BIT or f.queueFlags & vk.VK_QUEUE_COMPUTE_BIT
        )
        # The `vulkan` package keeps the arrays a struct points to alive only while that struct's
        # Python object lives. Built inside the list below, it would be freed as soon as
        # VkDeviceCreateInfo is built, before vkCreateDevice reads its queue priority: keep it in
        # a name until the call returns.
        queue_info = vk.VkDeviceQueueCreateInfo(queueFamilyIndex=family, queueCount=1, pQueuePriorities=[1.0])
        self.device = vk.vkCreateDevice(
            self.physical,
            vk.VkDeviceCreateInfo(
                pQueueCreateInfos=[queue_info],
                ppEnabledExtensionNames=["VK_KHR_external_memory_fd"],
            ),
            None,
        )
        del queue_info
        self.queue = vk.vkGetDeviceQueue(self.device, family, 0)
        self.pool = vk.vkCreateCommandPool(
            self.device,
            vk.VkCommandPoolCreateInfo(
                flags=vk.VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT, queueFamilyIndex=family
            ),
            None,
        )
        self.commands = vk.vkAllocateCommandBuffers(
            self.device,
            vk.VkCommandBufferAllocateInfo(
                commandPool=self.pool, level=vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY, commandBufferCount=1
            ),
        )[0]
        self.fence = vk.vkCreateFence(self.device, vk.VkFenceCreateInfo(), None)
        self._get_memory_fd = vk.vkGetDeviceProcAddr(self.device, "vkGetMemoryFdKHR")

    def _on_message(self, severity: int, types: int, data: Any, _user: Any) -> int:
        name = vk.ffi.string(data.pMessageIdName).decode() if data.pMessageIdName else ""
        text = vk.ffi.string(data.pMessage).decode()
        if "khronos-validation-createinstance-status-message" in name:
            self.layer_active = True  # the layer says it runs: informational
        elif severity >= vk.VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT and not (
            types == vk.VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT and "VK_INSTANCE_LAYERS" in text
        ):  # everything but the loader noting that an environment variable added the layer
            self.messages.append(f"{name}: {text}")
            print(f"validation: {name}: {text}", file=sys.stderr)
        return vk.VK_FALSE

    def _physical_device(self, device_uuid: str) -> Any:
        """The physical device whose deviceUUID is vk-adam's (memory is shared on one GPU only)."""
        seen = []
        for physical in vk.vkEnumeratePhysicalDevices(self.instance):
            ids = vk.VkPhysicalDeviceIDProperties()
            vk.vkGetPhysicalDeviceProperties2(physical, vk.VkPhysicalDeviceProperties2(pNext=ids))
            if bytes(ids.deviceUUID).hex() == device_uuid:
                self.device_uuid, self.driver_uuid = bytes(ids.deviceUUID), bytes(ids.driverUUID)
                return physical
            seen.append(bytes(ids.deviceUUID).hex())
        raise SystemExit(f"no physical device has vk-adam's deviceUUID {device_uuid} (seen: {seen})")

    def _memory_type(self, allowed: int, wanted: int) -> int:
        types = vk.vkGetPhysicalDeviceMemoryProperties(self.physical)
        for i in range(types.memoryTypeCount):
            if allowed & (1 << i) and types.memoryTypes[i].propertyFlags & wanted == wanted:
                return i
        raise SystemExit(f"no memory type with flags {wanted:#x} among {allowed:#x}")

    def _buffer(self, nbytes: int, usage: int, *, exportable: bool) -> tuple[Any, int, int]:
        external = vk.VkExternalMemoryBufferCreateInfo(handleTypes=OPAQUE_FD) if exportable else None
        buffer = vk.vkCreateBuffer(
            self.device,
            vk.VkBufferCreateInfo(
                pNext=external, size=nbytes, usage=usage, sharingMode=vk.VK_SHARING_MODE_EXCLUSIVE
            ),
            None,
        )
        needs = vk.vkGetBufferMemoryRequirements(self.device, buffer)
        return buffer, int(needs.size), int(needs.memoryTypeBits)

    def check_exportable(self) -> None:
        """Ask the driver whether such a buffer can be exported and imported as an opaque fd."""
        props = vk.VkExternalBufferProperties()
        vk.vkGetPhysicalDeviceExternalBufferProperties(
            self.physical, vk.VkPhysicalDeviceExternalBufferInfo(usage=USAGE, handleType=OPAQUE_FD), props
        )
        features = props.externalMemoryProperties.externalMemoryFeatures
        need = vk.VK_EXTERNAL_MEMORY_FEATURE_EXPORTABLE_BIT | vk.VK_EXTERNAL_MEMORY_FEATURE_IMPORTABLE_BIT
        if features & need != need:
            raise SystemExit("this device cannot export and import storage buffers as opaque fds")

    def exportable_buffer(self, count: int) -> tuple[Any, Any, int, dict[str, Any]]:
        """A float32 buffer of ``count`` elements in device-local memory, a dedicated allocation
        exportable as an opaque fd: (buffer, memory, fd, metadata for vk-adam)."""
        buffer, size, allowed = self._buffer(4 * count, USAGE, exportable=True)
        memory_type = self._memory_type(allowed, vk.VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT)
        dedicated = vk.VkMemoryDedicatedAllocateInfo(buffer=buffer)
        export = vk.VkExportMemoryAllocateInfo(pNext=dedicated, handleTypes=OPAQUE_FD)
        memory = vk.vkAllocateMemory(
            self.device,
            vk.VkMemoryAllocateInfo(pNext=export, allocationSize=size, memoryTypeIndex=memory_type),
            None,
        )
        vk.vkBindBufferMemory(self.device, buffer, memory, 0)
        fd = self._get_memory_fd(self.device, vk.VkMemoryGetFdInfoKHR(memory=memory, handleType=OPAQUE_FD))
        metadata = interop.foreign_metadata(
            fd,
            shape=(count,),
            dtype="float32",
            allocation_size=size,
            memory_type_index=memory_type,
            device_uuid=self.device_uuid,
            driver_uuid=self.driver_uuid,
        )
        self._destroy += [("buffer", buffer), ("memory", memory)]
        return buffer, memory, fd, metadata

    def staging(self, count: int) -> tuple[Any, Any]:
        """A host-visible, coherent buffer of ``count`` float32 and a NumPy view of its memory."""
        usage = vk.VK_BUFFER_USAGE_TRANSFER_SRC_BIT | vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT
        buffer, size, allowed = self._buffer(4 * count, usage, exportable=False)
        flags = vk.VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | vk.VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
        memory = vk.vkAllocateMemory(
            self.device,
            vk.VkMemoryAllocateInfo(allocationSize=size, memoryTypeIndex=self._memory_type(allowed, flags)),
            None,
        )
        vk.vkBindBufferMemory(self.device, buffer, memory, 0)
        mapped = vk.vkMapMemory(self.device, memory, 0, 4 * count, 0)
        self._destroy += [("buffer", buffer), ("memory", memory)]
        return buffer, np.frombuffer(mapped, dtype=np.float32, count=count)

    def copy(self, source: Any, destination: Any, nbytes: int, *, to_host: bool) -> None:
        """Copy on this app's queue and wait for its fence. The copy waits for this queue's
        earlier transfers (a barrier); ``to_host``: its writes are then made visible to host
        reads. vk-adam's device is ordered by the host: it is idle whenever this runs."""
        vk.vkBeginCommandBuffer(
            self.commands, vk.VkCommandBufferBeginInfo(flags=vk.VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT)
        )
        transfer = vk.VK_ACCESS_TRANSFER_READ_BIT | vk.VK_ACCESS_TRANSFER_WRITE_BIT
        earlier = vk.VkMemoryBarrier(srcAccessMask=vk.VK_ACCESS_TRANSFER_WRITE_BIT, dstAccessMask=transfer)
        stage = vk.VK_PIPELINE_STAGE_TRANSFER_BIT
        vk.vkCmdPipelineBarrier(self.commands, stage, stage, 0, 1, [earlier], 0, None, 0, None)
        vk.vkCmdCopyBuffer(self.commands, source, destination, 1, [vk.VkBufferCopy(0, 0, nbytes)])
        if to_host:
            host = vk.VkMemoryBarrier(
                srcAccessMask=vk.VK_ACCESS_TRANSFER_WRITE_BIT, dstAccessMask=vk.VK_ACCESS_HOST_READ_BIT
            )
            vk.vkCmdPipelineBarrier(
                self.commands, stage, vk.VK_PIPELINE_STAGE_HOST_BIT, 0, 1, [host], 0, None, 0, None
            )
        vk.vkEndCommandBuffer(self.commands)
        vk.vkQueueSubmit(self.queue, 1, [vk.VkSubmitInfo(pCommandBuffers=[self.commands])], self.fence)
        vk.vkWaitForFences(self.device, 1, [self.fence], vk.VK_TRUE, 10**10)
        vk.vkResetFences(self.device, 1, [self.fence])

    def close(self) -> None:
        vk.vkDeviceWaitIdle(self.device)
        for kind, handle in reversed(self._destroy):
            if kind == "buffer":
                vk.vkDestroyBuffer(self.device, handle, None)
            else:
                vk.vkFreeMemory(self.device, handle, None)
        vk.vkDestroyFence(self.device, self.fence, None)
        vk.vkDestroyCommandPool(self.device, self.pool, None)
        vk.vkDestroyDevice(self.device, None)
        if self.messenger is not None:
            destroy = vk.vkGetInstanceProcAddr(self.instance, "vkDestroyDebugUtilsMessengerEXT")
            destroy(self.instance, self.messenger, None)
        vk.vkDestroyInstance(self.instance, None)


def numpy_adamw(
    p: np.ndarray, g: np.ndarray, m: np.ndarray, v: np.ndarray, t: int, hp: dict[str, Any]
) -> None:
    """One AdamW step in float64, in place (torch.optim.AdamW's formula)."""
    b1, b2 = hp["betas"]
    p *= 1.0 - hp["lr"] * hp["weight_decay"]
    m[:] = b1 * m + (1.0 - b1) * g
    v[:] = b2 * v + (1.0 - b2) * g * g
    denominator = np.sqrt(v / (1.0 - b2**t)) + hp["eps"]
    p -= hp["lr"] / (1.0 - b1**t) * m / denominator


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--size", type=int, default=4099, help="elements of the weights")
    parser.add_argument("--validate", action="store_true", help="Khronos validation for the app's instance")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    hp = {"lr": 0.05, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.01}
    weights = rng.standard_normal(args.size).astype(np.float32)

    with vk_adam.open_device() as device:  # vk-adam's own VkDevice
        app = RawVulkanApp(interop.device_uuid(device), validate=args.validate)
        app.check_exportable()
        p_buffer, _, p_fd, p_meta = app.exportable_buffer(args.size)
        g_buffer, _, g_fd, g_meta = app.exportable_buffer(args.size)
        staging, host = app.staging(args.size)
        host[:] = weights
        app.copy(staging, p_buffer, 4 * args.size, to_host=False)  # the app's initial weights

        params = interop.import_memory(p_fd, p_meta, manager=device)
        grads = interop.import_memory(g_fd, g_meta, manager=device)
        os.close(p_fd)  # vk-adam imported dups: the fds stay the app's, to close when it likes
        os.close(g_fd)

        p64, m, v = weights.astype(np.float64), np.zeros(args.size), np.zeros(args.size)
        worst = 0.0
        with vk_adam.AdamW([params], manager=device, **hp) as opt:
            for step in range(1, args.steps + 1):
                g = (rng.standard_normal(args.size) * 10.0 ** rng.uniform(-2, 1)).astype(np.float32)
                host[:] = g
                app.copy(staging, g_buffer, 4 * args.size, to_host=False)  # 1. the app writes, waits
                opt.step([grads])  # 2. vk-adam steps; returns when its device is done
                app.copy(p_buffer, staging, 4 * args.size, to_host=True)  # 3. the app reads, waits
                got = host.copy()
                numpy_adamw(p64, g.astype(np.float64), m, v, step, hp)
                error = float(np.max(np.abs(got - p64)) / np.max(np.abs(p64)))
                worst = max(worst, error)
                print(f"step {step}: max |vk-adam - NumPy| / max |p| = {error:.2e}")
        del params, grads
        app.close()

    ok = worst < 1e-5
    verdict = "match" if ok else "DIFFER FROM"
    print(f"{args.steps} steps on the app's own buffers: {verdict} NumPy (worst {worst:.2e})")
    if args.validate:
        if not app.layer_active:
            print("validation: the layer did not report from the app's instance", file=sys.stderr)
            return 1
        print(f"validation (app's instance, core + synchronization): {len(app.messages)} messages")
        ok = ok and not app.messages
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
