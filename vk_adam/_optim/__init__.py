"""The optimizer front: param groups, hyperparameters and step orchestration (``optimizer``),
the torch-named classes (``presets``) and the functional form (``functional``). It speaks to
the device only through ``vk_adam._runtime``."""
