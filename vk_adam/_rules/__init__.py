"""Update rules: what a rule is (``rule``), the pluggy hook that registers rules
(``hookspecs``), the built-in rules registered through it like any plugin (``builtin``), the
registry that loads them (``registry``), the checks of a rule against its shaders that the
registry and the optimizer run (``checks``), and SPIR-V loading and reflection (``spirv``).
Nothing here touches a Vulkan device."""
