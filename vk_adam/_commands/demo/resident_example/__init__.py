"""The application ``vk-adam demo`` runs GPU-resident: a LoRA fine-tune whose forward, loss and
backward are its own GLSL shaders (``shaders/``, compiled into ``spirv/`` by the build), with
vk-adam's optimizer recorded into the same kp sequences (``train.py``; docs/resident-training.md).

It is an application, not part of the library: it owns its ``kp.Manager`` and calls kp directly,
as any application does. The library does not import it; ``vk-adam demo`` and ``vk-adam bench
--cases train`` do. It ships in the wheel, so ``vk-adam demo`` runs from an installed package.
To start your own, copy this folder, from the checkout or from the installed package
(``python -c "import vk_adam._commands.demo.resident_example as m; print(m.__path__[0])"``).
"""
