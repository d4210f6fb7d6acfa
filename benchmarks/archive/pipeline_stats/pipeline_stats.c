// pipeline_stats: what the driver made of one compute shader (registers, shared memory, ...).
//
// Creates a compute pipeline from a SPIR-V file with the given specialization constants and
// prints the statistics the driver reports through VK_KHR_pipeline_executable_properties, as
// one JSON object. The register count bounds how many subgroups an SM / CU keeps resident,
// which is what the memory-bound update loops live on. See README.md.
//
// Usage: pipeline_stats [-d DEVICE] [-s WORDS] SHADER.spv
//   -s WORDS  specialization constants 0..k-1 as comma-separated 32-bit words, each hex
//             (0x3f800000) or decimal; kp passes every constant as a 32-bit word in id order.
#define _GNU_SOURCE
#include <vulkan/vulkan.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void die(const char *what, int vk_result) {
    if (vk_result) fprintf(stderr, "pipeline_stats: %s failed (VkResult %d)\n", what, vk_result);
    else fprintf(stderr, "pipeline_stats: %s\n", what);
    exit(1);
}
#define VK(call) do { VkResult r_ = (call); if (r_ != VK_SUCCESS) die(#call, r_); } while (0)

static void json_str(const char *s) {
    putchar('"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') printf("\\%c", *s);
        else if ((unsigned char)*s < 0x20) printf("\\u%04x", (unsigned char)*s);
        else putchar(*s);
    }
    putchar('"');
}

static uint32_t *read_spv(const char *path, size_t *bytes) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "pipeline_stats: cannot open %s\n", path);
        exit(1);
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    uint32_t *buf = n > 0 && n % 4 == 0 ? malloc((size_t)n) : NULL;
    if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n || buf[0] != 0x07230203) {
        fprintf(stderr, "pipeline_stats: %s is not a SPIR-V file\n", path);
        exit(1);
    }
    fclose(f);
    *bytes = (size_t)n;
    return buf;
}

enum { MAX_SPEC = 64, BINDINGS = 32, PUSH_BYTES = 128 };

int main(int argc, char **argv) {
    long dev_index = 0;
    uint32_t spec[MAX_SPEC];
    uint32_t nspec = 0;
    const char *path = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-d") && i + 1 < argc) dev_index = strtol(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "-s") && i + 1 < argc) {
            for (char *tok = strtok(argv[++i], ","); tok; tok = strtok(NULL, ",")) {
                if (nspec == MAX_SPEC) die("too many specialization constants", 0);
                spec[nspec++] = (uint32_t)strtoul(tok, NULL, 0);
            }
        } else if (argv[i][0] != '-') path = argv[i];
        else die("usage: pipeline_stats [-d DEVICE] [-s WORDS] SHADER.spv", 0);
    }
    if (!path) die("usage: pipeline_stats [-d DEVICE] [-s WORDS] SHADER.spv", 0);
    size_t bytes;
    uint32_t *code = read_spv(path, &bytes);  // a bad file is refused before any Vulkan call

    VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO, .apiVersion = VK_API_VERSION_1_2};
    VkInstanceCreateInfo ici = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, .pApplicationInfo = &app};
    VkInstance inst;
    VK(vkCreateInstance(&ici, NULL, &inst));
    uint32_t ndev = 16;
    VkPhysicalDevice pdevs[16];
    VkResult er = vkEnumeratePhysicalDevices(inst, &ndev, pdevs);
    if (er != VK_SUCCESS && er != VK_INCOMPLETE) die("vkEnumeratePhysicalDevices", er);
    if (dev_index < 0 || dev_index >= (long)ndev) {
        fprintf(stderr, "pipeline_stats: no device %ld (this machine has %u)\n", dev_index, ndev);
        exit(1);
    }
    VkPhysicalDevice pdev = pdevs[dev_index];
    VkPhysicalDeviceProperties props;
    vkGetPhysicalDeviceProperties(pdev, &props);

    // The extension and its feature, or a clear "not reported" (a valid answer: some drivers
    // do not implement it).
    uint32_t next = 0;
    VK(vkEnumerateDeviceExtensionProperties(pdev, NULL, &next, NULL));
    VkExtensionProperties *exts = calloc(next, sizeof *exts);
    VK(vkEnumerateDeviceExtensionProperties(pdev, NULL, &next, exts));
    int has_ext = 0;
    for (uint32_t i = 0; i < next; i++)
        has_ext |= !strcmp(exts[i].extensionName, VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME);
    VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR pep = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR};
    VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &pep};
    if (has_ext) vkGetPhysicalDeviceFeatures2(pdev, &f2);
    if (!has_ext || !pep.pipelineExecutableInfo) {
        printf("{\"device\": ");
        json_str(props.deviceName);
        printf(", \"shader\": ");
        json_str(path);
        printf(", \"error\": \"the driver does not report pipeline executable statistics\"}\n");
        return 2;
    }

    uint32_t nqf = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(pdev, &nqf, NULL);
    VkQueueFamilyProperties *qfp = calloc(nqf, sizeof *qfp);
    vkGetPhysicalDeviceQueueFamilyProperties(pdev, &nqf, qfp);
    uint32_t qf = UINT32_MAX;
    for (uint32_t i = 0; i < nqf && qf == UINT32_MAX; i++)
        if (qfp[i].queueFlags & VK_QUEUE_COMPUTE_BIT) qf = i;
    if (qf == UINT32_MAX) die("no compute queue family", 0);
    float prio = 1.0f;
    VkDeviceQueueCreateInfo qci = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
        .queueFamilyIndex = qf, .queueCount = 1, .pQueuePriorities = &prio};
    const char *dev_exts[] = {VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME};
    VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR want = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR,
        .pipelineExecutableInfo = VK_TRUE};
    VkDeviceCreateInfo dci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, .pNext = &want,
        .queueCreateInfoCount = 1, .pQueueCreateInfos = &qci,
        .enabledExtensionCount = 1, .ppEnabledExtensionNames = dev_exts};
    VkDevice dev;
    VK(vkCreateDevice(pdev, &dci, NULL, &dev));

    // A layout with more storage-buffer bindings and push-constant bytes than any update
    // shader declares: unused layout entries are allowed, missing ones are not.
    VkDescriptorSetLayoutBinding binds[BINDINGS];
    for (uint32_t i = 0; i < BINDINGS; i++)
        binds[i] = (VkDescriptorSetLayoutBinding){.binding = i, .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
            .descriptorCount = 1, .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT};
    VkDescriptorSetLayoutCreateInfo dslci = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
        .bindingCount = BINDINGS, .pBindings = binds};
    VkDescriptorSetLayout dsl;
    VK(vkCreateDescriptorSetLayout(dev, &dslci, NULL, &dsl));
    VkPushConstantRange pcr = {.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT, .offset = 0, .size = PUSH_BYTES};
    VkPipelineLayoutCreateInfo plci = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
        .setLayoutCount = 1, .pSetLayouts = &dsl, .pushConstantRangeCount = 1, .pPushConstantRanges = &pcr};
    VkPipelineLayout layout;
    VK(vkCreatePipelineLayout(dev, &plci, NULL, &layout));

    VkShaderModuleCreateInfo smci = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO, .codeSize = bytes, .pCode = code};
    VkShaderModule module;
    VK(vkCreateShaderModule(dev, &smci, NULL, &module));
    VkSpecializationMapEntry entries[MAX_SPEC];
    for (uint32_t i = 0; i < nspec; i++)
        entries[i] = (VkSpecializationMapEntry){.constantID = i, .offset = 4 * i, .size = 4};
    VkSpecializationInfo si = {.mapEntryCount = nspec, .pMapEntries = entries, .dataSize = 4 * nspec, .pData = spec};
    VkComputePipelineCreateInfo cpci = {.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
        .flags = VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR,
        .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO, .stage = VK_SHADER_STAGE_COMPUTE_BIT,
            .module = module, .pName = "main", .pSpecializationInfo = nspec ? &si : NULL},
        .layout = layout};
    VkPipeline pipe;
    VK(vkCreateComputePipelines(dev, VK_NULL_HANDLE, 1, &cpci, NULL, &pipe));

    PFN_vkGetPipelineExecutablePropertiesKHR get_props =
        (PFN_vkGetPipelineExecutablePropertiesKHR)vkGetDeviceProcAddr(dev, "vkGetPipelineExecutablePropertiesKHR");
    PFN_vkGetPipelineExecutableStatisticsKHR get_stats =
        (PFN_vkGetPipelineExecutableStatisticsKHR)vkGetDeviceProcAddr(dev, "vkGetPipelineExecutableStatisticsKHR");
    if (!get_props || !get_stats) die("vkGetPipelineExecutable*KHR not found", 0);
    VkPipelineInfoKHR pinfo = {.sType = VK_STRUCTURE_TYPE_PIPELINE_INFO_KHR, .pipeline = pipe};
    uint32_t nexe = 0;
    VK(get_props(dev, &pinfo, &nexe, NULL));
    VkPipelineExecutablePropertiesKHR *exe = calloc(nexe, sizeof *exe);
    for (uint32_t i = 0; i < nexe; i++) exe[i].sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_PROPERTIES_KHR;
    VK(get_props(dev, &pinfo, &nexe, exe));

    printf("{\"device\": ");
    json_str(props.deviceName);
    printf(", \"shader\": ");
    json_str(path);
    printf(", \"executables\": [");
    for (uint32_t e = 0; e < nexe; e++) {
        printf("%s{\"name\": ", e ? ", " : "");
        json_str(exe[e].name);
        printf(", \"subgroup_size\": %u, \"statistics\": {", exe[e].subgroupSize);
        VkPipelineExecutableInfoKHR einfo = {.sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR,
            .pipeline = pipe, .executableIndex = e};
        uint32_t nst = 0;
        VK(get_stats(dev, &einfo, &nst, NULL));
        VkPipelineExecutableStatisticKHR *st = calloc(nst, sizeof *st);
        for (uint32_t i = 0; i < nst; i++) st[i].sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_STATISTIC_KHR;
        VK(get_stats(dev, &einfo, &nst, st));
        for (uint32_t i = 0; i < nst; i++) {
            printf("%s", i ? ", " : "");
            json_str(st[i].name);
            switch (st[i].format) {
            case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_BOOL32_KHR: printf(": %s", st[i].value.b32 ? "true" : "false"); break;
            case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_INT64_KHR: printf(": %lld", (long long)st[i].value.i64); break;
            case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_UINT64_KHR: printf(": %llu", (unsigned long long)st[i].value.u64); break;
            default: printf(": %g", st[i].value.f64); break;
            }
        }
        printf("}}");
        free(st);
    }
    printf("]}\n");
    vkDestroyPipeline(dev, pipe, NULL);
    vkDestroyShaderModule(dev, module, NULL);
    vkDestroyPipelineLayout(dev, layout, NULL);
    vkDestroyDescriptorSetLayout(dev, dsl, NULL);
    vkDestroyDevice(dev, NULL);
    vkDestroyInstance(inst, NULL);
    return 0;
}
