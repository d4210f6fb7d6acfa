// vulkan_floor: the raw Vulkan host-synchronization floor.
//
// Times one pre-recorded 1x1x1 compute dispatch + host wait with plain Vulkan,
// in four submit/wait patterns, so wrapper overheads (e.g. Kompute) can be
// compared against what the driver itself costs. See README.md.
//
// Usage: vulkan_floor [-d DEVICE] [-q QUEUE_FAMILY] [-n ITERS] [-w WARMUP] [-s floor.spv]
// Env:   VULKAN_FLOOR_DEVICE, VULKAN_FLOOR_SPV (flags win over env).
#define _GNU_SOURCE
#include <vulkan/vulkan.h>
#include <libgen.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

// Any failure ends the run: a partial measurement would be misleading.
static void die(const char *what, int vk_result) {
    if (vk_result) fprintf(stderr, "vulkan_floor: %s failed (VkResult %d)\n", what, vk_result);
    else fprintf(stderr, "vulkan_floor: %s\n", what);
    exit(1);
}
#define fail(msg) die(msg, 0)
#define VK(call) do { VkResult r_ = (call); if (r_ != VK_SUCCESS) die(#call, r_); } while (0)

// SPIR-V of floor.comp, used when no floor.spv file is found, so the binary
// runs where glslang is missing. build.sh regenerates it when glslang is present.
#include "floor_spv.h"

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

// Device names and paths go into JSON; escape the few characters that would break it.
static void json_str(const char *s) {
    putchar('"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') printf("\\%c", *s);
        else if ((unsigned char)*s < 0x20) printf("\\u%04x", (unsigned char)*s);
        else putchar(*s);
    }
    putchar('"');
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

// Returns the file's words (malloc'd), or NULL if it cannot be opened.
static uint32_t *read_spv(const char *path, size_t *bytes) {
    FILE *f = path[0] ? fopen(path, "rb") : NULL;
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    uint32_t *buf = n > 0 && n % 4 == 0 ? malloc((size_t)n) : NULL;
    if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n || buf[0] != 0x07230203) {
        fprintf(stderr, "vulkan_floor: %s is not a valid SPIR-V file\n", path);
        exit(1);
    }
    fclose(f);
    *bytes = (size_t)n;
    return buf;
}

// State shared by the timed modes.
static VkDevice dev;
static VkQueue queue;
static VkSubmitInfo submit;
static VkFence fence;

enum { CREATE_FENCE, REUSE_BLOCK, REUSE_SPIN, SUBMIT_ONLY, NMODES };
static const char *mode_names[NMODES] = {
    "create_fence", "reuse_fence_block", "reuse_fence_spin", "submit_only"};

// One iteration of a mode; returns the timed duration in microseconds.
static double run_once(int mode) {
    double t0, t1;
    VkResult r;
    switch (mode) {
    case CREATE_FENCE: { // what Kompute 0.9.0 does for every eval()
        VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
        VkFence f;
        t0 = now_us();
        VK(vkCreateFence(dev, &fci, NULL, &f));
        VK(vkQueueSubmit(queue, 1, &submit, f));
        VK(vkWaitForFences(dev, 1, &f, VK_TRUE, UINT64_MAX));
        vkDestroyFence(dev, f, NULL);
        return now_us() - t0;
    }
    case REUSE_BLOCK:
        t0 = now_us();
        VK(vkResetFences(dev, 1, &fence));
        VK(vkQueueSubmit(queue, 1, &submit, fence));
        VK(vkWaitForFences(dev, 1, &fence, VK_TRUE, UINT64_MAX));
        return now_us() - t0;
    case REUSE_SPIN: // trades a CPU core for skipping the driver's sleep/wakeup
        t0 = now_us();
        VK(vkResetFences(dev, 1, &fence));
        VK(vkQueueSubmit(queue, 1, &submit, fence));
        while ((r = vkGetFenceStatus(dev, fence)) == VK_NOT_READY) {}
        if (r != VK_SUCCESS) die("vkGetFenceStatus", r);
        return now_us() - t0;
    default: // SUBMIT_ONLY: submission cost alone; completion waited untimed
        VK(vkResetFences(dev, 1, &fence));
        t0 = now_us();
        VK(vkQueueSubmit(queue, 1, &submit, fence));
        t1 = now_us();
        VK(vkWaitForFences(dev, 1, &fence, VK_TRUE, UINT64_MAX));
        return t1 - t0;
    }
}

int main(int argc, char **argv) {
    long dev_index = -1, qf_index = -1, iters = 2000, warmup = 200;
    const char *spv_path = getenv("VULKAN_FLOOR_SPV");
    if (getenv("VULKAN_FLOOR_DEVICE")) dev_index = atol(getenv("VULKAN_FLOOR_DEVICE"));
    for (int c; (c = getopt(argc, argv, "d:q:n:w:s:h")) != -1;) {
        switch (c) {
        case 'd': dev_index = atol(optarg); break;
        case 'q': qf_index = atol(optarg); break;
        case 'n': iters = atol(optarg); break;
        case 'w': warmup = atol(optarg); break;
        case 's': spv_path = optarg; break;
        default:
            fprintf(stderr, "usage: %s [-d DEVICE] [-q QUEUE_FAMILY] [-n ITERS] [-w WARMUP] [-s SPV]\n", argv[0]);
            return c == 'h' ? 0 : 2;
        }
    }
    if (iters < 1 || warmup < 0) fail("-n must be >= 1 and -w >= 0");

    // Shader: explicit path, else floor.spv beside the executable, else embedded.
    char self[4096], exe_spv[4200] = "";
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len > 0) { self[len] = 0; snprintf(exe_spv, sizeof exe_spv, "%s/floor.spv", dirname(self)); }
    const char *shader_src = spv_path ? spv_path : exe_spv;
    size_t code_bytes = 0;
    uint32_t *loaded = read_spv(shader_src, &code_bytes);
    if (!loaded && spv_path) fail("cannot open the SPIR-V file given by -s / VULKAN_FLOOR_SPV");
    if (!loaded) { shader_src = "embedded"; code_bytes = sizeof floor_spv; }

    // No layers, no extensions: the point is the bare driver.
    VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO, .pApplicationName = "vulkan_floor",
                             .apiVersion = VK_API_VERSION_1_1};
    VkInstanceCreateInfo ici = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, .pApplicationInfo = &app};
    VkInstance inst;
    VK(vkCreateInstance(&ici, NULL, &inst));

    VkPhysicalDevice pdevs[16];
    uint32_t ndev = 16;
    VkResult er = vkEnumeratePhysicalDevices(inst, &ndev, pdevs);
    if (er != VK_SUCCESS && er != VK_INCOMPLETE) die("vkEnumeratePhysicalDevices", er);
    if (ndev == 0) fail("no Vulkan devices found");
    VkPhysicalDeviceProperties props;
    for (uint32_t i = 0; dev_index < 0 && i < ndev; i++) { // default: first discrete GPU
        vkGetPhysicalDeviceProperties(pdevs[i], &props);
        if (props.deviceType == VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU) dev_index = i;
    }
    if (dev_index < 0) dev_index = 0;
    if (dev_index >= (long)ndev) fail("device index out of range (vulkaninfo --summary lists them)");
    VkPhysicalDevice pdev = pdevs[dev_index];
    vkGetPhysicalDeviceProperties(pdev, &props);

    // Default queue: the first compute-capable family, which is what Kompute picks.
    VkQueueFamilyProperties qfp[32];
    uint32_t nqf = 32;
    vkGetPhysicalDeviceQueueFamilyProperties(pdev, &nqf, qfp);
    for (uint32_t i = 0; qf_index < 0 && i < nqf; i++)
        if (qfp[i].queueFlags & VK_QUEUE_COMPUTE_BIT) qf_index = i;
    if (qf_index < 0 || qf_index >= (long)nqf || !(qfp[qf_index].queueFlags & VK_QUEUE_COMPUTE_BIT))
        fail("no usable compute queue family");
    float prio = 1.0f;
    VkDeviceQueueCreateInfo qci = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
        .queueFamilyIndex = (uint32_t)qf_index, .queueCount = 1, .pQueuePriorities = &prio};
    VkDeviceCreateInfo dci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
        .queueCreateInfoCount = 1, .pQueueCreateInfos = &qci};
    VK(vkCreateDevice(pdev, &dci, NULL, &dev));
    vkGetDeviceQueue(dev, (uint32_t)qf_index, 0, &queue);

    // Host-visible coherent memory, so the host can check the counter at the end.
    const VkDeviceSize size = 4096;
    VkBufferCreateInfo bci = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, .size = size,
        .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT, .sharingMode = VK_SHARING_MODE_EXCLUSIVE};
    VkBuffer buf;
    VK(vkCreateBuffer(dev, &bci, NULL, &buf));
    VkMemoryRequirements mr;
    vkGetBufferMemoryRequirements(dev, buf, &mr);
    VkPhysicalDeviceMemoryProperties mp;
    vkGetPhysicalDeviceMemoryProperties(pdev, &mp);
    const VkMemoryPropertyFlags want = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    uint32_t mt = UINT32_MAX;
    for (uint32_t i = 0; mt == UINT32_MAX && i < mp.memoryTypeCount; i++)
        if ((mr.memoryTypeBits & (1u << i)) && (mp.memoryTypes[i].propertyFlags & want) == want) mt = i;
    if (mt == UINT32_MAX) fail("no host-visible coherent memory type");
    VkMemoryAllocateInfo mai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
        .allocationSize = mr.size, .memoryTypeIndex = mt};
    VkDeviceMemory mem;
    VK(vkAllocateMemory(dev, &mai, NULL, &mem));
    VK(vkBindBufferMemory(dev, buf, mem, 0));
    volatile uint32_t *counter;
    VK(vkMapMemory(dev, mem, 0, size, 0, (void **)&counter));
    counter[0] = 0;

    VkDescriptorSetLayoutBinding bind = {.binding = 0, .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
        .descriptorCount = 1, .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT};
    VkDescriptorSetLayoutCreateInfo dslci = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
        .bindingCount = 1, .pBindings = &bind};
    VkDescriptorSetLayout dsl;
    VK(vkCreateDescriptorSetLayout(dev, &dslci, NULL, &dsl));
    VkDescriptorPoolSize ps = {VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1};
    VkDescriptorPoolCreateInfo dpci = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
        .maxSets = 1, .poolSizeCount = 1, .pPoolSizes = &ps};
    VkDescriptorPool dp;
    VK(vkCreateDescriptorPool(dev, &dpci, NULL, &dp));
    VkDescriptorSetAllocateInfo dsai = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
        .descriptorPool = dp, .descriptorSetCount = 1, .pSetLayouts = &dsl};
    VkDescriptorSet ds;
    VK(vkAllocateDescriptorSets(dev, &dsai, &ds));
    VkDescriptorBufferInfo dbi = {buf, 0, size};
    VkWriteDescriptorSet wds = {.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, .dstSet = ds,
        .descriptorCount = 1, .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, .pBufferInfo = &dbi};
    vkUpdateDescriptorSets(dev, 1, &wds, 0, NULL);

    VkShaderModuleCreateInfo smci = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
        .codeSize = code_bytes, .pCode = loaded ? loaded : floor_spv};
    VkShaderModule sm;
    VK(vkCreateShaderModule(dev, &smci, NULL, &sm));
    VkPipelineLayoutCreateInfo plci = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
        .setLayoutCount = 1, .pSetLayouts = &dsl};
    VkPipelineLayout pl;
    VK(vkCreatePipelineLayout(dev, &plci, NULL, &pl));
    VkComputePipelineCreateInfo cpci = {.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO, .layout = pl,
        .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                  .stage = VK_SHADER_STAGE_COMPUTE_BIT, .module = sm, .pName = "main"}};
    VkPipeline pipe;
    VK(vkCreateComputePipelines(dev, VK_NULL_HANDLE, 1, &cpci, NULL, &pipe));

    // Recorded once and resubmitted: the floor excludes recording cost.
    VkCommandPoolCreateInfo cpoi = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
        .queueFamilyIndex = (uint32_t)qf_index};
    VkCommandPool cp;
    VK(vkCreateCommandPool(dev, &cpoi, NULL, &cp));
    VkCommandBufferAllocateInfo cbai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
        .commandPool = cp, .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY, .commandBufferCount = 1};
    VkCommandBuffer cb;
    VK(vkAllocateCommandBuffers(dev, &cbai, &cb));
    VkCommandBufferBeginInfo cbbi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    VK(vkBeginCommandBuffer(cb, &cbbi));
    // A fence wait gives the *next* submission no visibility of this one's write,
    // so order dispatch-after-dispatch explicitly, and publish the result to the host.
    VkMemoryBarrier in_bar = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER, .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
        .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT};
    vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0,
                         1, &in_bar, 0, NULL, 0, NULL);
    vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, pipe);
    vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_COMPUTE, pl, 0, 1, &ds, 0, NULL);
    vkCmdDispatch(cb, 1, 1, 1);
    VkMemoryBarrier out_bar = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
        .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT, .dstAccessMask = VK_ACCESS_HOST_READ_BIT};
    vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0,
                         1, &out_bar, 0, NULL, 0, NULL);
    VK(vkEndCommandBuffer(cb));
    submit = (VkSubmitInfo){.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &cb};
    VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    VK(vkCreateFence(dev, &fci, NULL, &fence));

    // Each mode gets its own warm-up, so driver/GPU clocks settle for that pattern.
    double *samples = malloc(sizeof(double) * (size_t)iters);
    if (!samples) fail("out of memory");
    double stats[NMODES][5]; // median, p10, p90, min, mean
    for (int m = 0; m < NMODES; m++) {
        for (long i = 0; i < warmup; i++) run_once(m);
        double sum = 0;
        for (long i = 0; i < iters; i++) sum += samples[i] = run_once(m);
        qsort(samples, (size_t)iters, sizeof(double), cmp_double);
        const double q[3] = {0.5, 0.1, 0.9}; // nearest-rank percentiles
        for (int k = 0; k < 3; k++) stats[m][k] = samples[(size_t)(q[k] * (iters - 1) + 0.5)];
        stats[m][3] = samples[0];
        stats[m][4] = sum / iters;
    }

    // Every submission must have run exactly once, or the timings mean nothing.
    uint32_t expected = (uint32_t)(NMODES * (iters + warmup));
    if (counter[0] != expected) {
        fprintf(stderr, "vulkan_floor: counter is %u, expected %u\n", counter[0], expected);
        fail("dispatches did not all run");
    }

    // NVIDIA packs driverVersion as 10.8.8.6 bits; others use VK_MAKE_VERSION.
    uint32_t dv = props.driverVersion, av = props.apiVersion;
    char dvs[64];
    if (props.vendorID == 0x10DE)
        snprintf(dvs, sizeof dvs, "%u.%u.%u.%u", dv >> 22, (dv >> 14) & 0xff, (dv >> 6) & 0xff, dv & 0x3f);
    else
        snprintf(dvs, sizeof dvs, "%u.%u.%u", VK_VERSION_MAJOR(dv), VK_VERSION_MINOR(dv), VK_VERSION_PATCH(dv));
    printf("{\"device\": ");
    json_str(props.deviceName);
    printf(", \"device_index\": %ld, \"vendor_id\": \"0x%04x\", \"driver_version\": \"%s\", "
           "\"driver_version_raw\": %u, \"api_version\": \"%u.%u.%u\", \"queue_family\": %ld, \"shader\": ",
           dev_index, props.vendorID, dvs, dv, VK_VERSION_MAJOR(av), VK_VERSION_MINOR(av), VK_VERSION_PATCH(av),
           qf_index);
    json_str(shader_src);
    printf(", \"iterations\": %ld, \"warmup\": %ld, \"modes\": {", iters, warmup);
    for (int m = 0; m < NMODES; m++)
        printf("%s\"%s\": {\"median_us\": %.2f, \"p10_us\": %.2f, \"p90_us\": %.2f, \"min_us\": %.2f, "
               "\"mean_us\": %.2f}", m ? ", " : "", mode_names[m],
               stats[m][0], stats[m][1], stats[m][2], stats[m][3], stats[m][4]);
    printf("}}\n");

    VK(vkDeviceWaitIdle(dev));
    vkDestroyFence(dev, fence, NULL);
    vkDestroyCommandPool(dev, cp, NULL);
    vkDestroyPipeline(dev, pipe, NULL);
    vkDestroyPipelineLayout(dev, pl, NULL);
    vkDestroyShaderModule(dev, sm, NULL);
    vkDestroyDescriptorPool(dev, dp, NULL);
    vkDestroyDescriptorSetLayout(dev, dsl, NULL);
    vkDestroyBuffer(dev, buf, NULL);
    vkFreeMemory(dev, mem, NULL); // implicitly unmaps
    vkDestroyDevice(dev, NULL);
    vkDestroyInstance(inst, NULL);
    free(samples);
    free(loaded);
    return 0;
}
