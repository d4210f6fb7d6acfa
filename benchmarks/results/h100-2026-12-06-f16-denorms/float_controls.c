/* Print each Vulkan device's VkPhysicalDeviceFloatControlsProperties (Vulkan 1.2 core). */
#include <stdio.h>
#include <vulkan/vulkan.h>

int main(void) {
    VkApplicationInfo app = {VK_STRUCTURE_TYPE_APPLICATION_INFO};
    app.apiVersion = VK_API_VERSION_1_2;
    VkInstanceCreateInfo ci = {VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
    ci.pApplicationInfo = &app;
    VkInstance inst;
    if (vkCreateInstance(&ci, NULL, &inst) != VK_SUCCESS) { puts("no instance"); return 1; }
    uint32_t n = 8;
    VkPhysicalDevice devs[8];
    vkEnumeratePhysicalDevices(inst, &n, devs);
    for (uint32_t i = 0; i < n; i++) {
        VkPhysicalDeviceFloatControlsProperties fc = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FLOAT_CONTROLS_PROPERTIES};
        VkPhysicalDeviceProperties2 p = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, &fc};
        vkGetPhysicalDeviceProperties2(devs[i], &p);
        printf("%s (api %u.%u.%u)\n", p.properties.deviceName, VK_API_VERSION_MAJOR(p.properties.apiVersion),
               VK_API_VERSION_MINOR(p.properties.apiVersion), VK_API_VERSION_PATCH(p.properties.apiVersion));
        printf("  denormBehaviorIndependence %d roundingModeIndependence %d\n", fc.denormBehaviorIndependence,
               fc.roundingModeIndependence);
        printf("  shaderDenormPreserveFloat16/32/64 %u %u %u\n", fc.shaderDenormPreserveFloat16,
               fc.shaderDenormPreserveFloat32, fc.shaderDenormPreserveFloat64);
        printf("  shaderDenormFlushToZeroFloat16/32/64 %u %u %u\n", fc.shaderDenormFlushToZeroFloat16,
               fc.shaderDenormFlushToZeroFloat32, fc.shaderDenormFlushToZeroFloat64);
        printf("  shaderSignedZeroInfNanPreserveFloat16/32/64 %u %u %u\n", fc.shaderSignedZeroInfNanPreserveFloat16,
               fc.shaderSignedZeroInfNanPreserveFloat32, fc.shaderSignedZeroInfNanPreserveFloat64);
        printf("  shaderRoundingModeRTEFloat16/32/64 %u %u %u\n", fc.shaderRoundingModeRTEFloat16,
               fc.shaderRoundingModeRTEFloat32, fc.shaderRoundingModeRTEFloat64);
        printf("  shaderRoundingModeRTZFloat16/32/64 %u %u %u\n", fc.shaderRoundingModeRTZFloat16,
               fc.shaderRoundingModeRTZFloat32, fc.shaderRoundingModeRTZFloat64);
    }
    vkDestroyInstance(inst, NULL);
    return 0;
}
