"""The LoRA adapter itself: every A and B of every layer in one flat buffer, updated by one
dispatch (the package docstring, ``vk_adam.lora``, shows the use).

This module owns the layout, the optimizer over it, the host/device copies and the checked
update. It builds on :mod:`.modules` (:class:`LoRAModule`, dtypes, PEFT's names) and on
:mod:`.peft` (PEFT's file layout, which deals in plain values and never imports this module);
checkpoints (:mod:`.checkpoint`) and torch's state (:mod:`.torch_state`) build on it.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .. import _formats as fmt
from .._errors import OptimizerClosedError
from .._inputs import convert_float_or_refuse
from .._optim import ALIGN_ELEMENTS, Optimizer, StepHandle
from .._runtime import Runtime, host_view
from .modules import DEFAULT_PATH_TEMPLATE, F32, PEFT_PREFIX, Array, LoRAModule, adapter_dtype, peft_key
from .peft import peft_config, read_peft, write_peft


def _align(n: int) -> int:
    return -(-n // ALIGN_ELEMENTS) * ALIGN_ELEMENTS


class LoRAAdapter:
    """All LoRA A/B tensors of a model in one aligned flat buffer (plus gradients), of
    ``dtype`` float32 (default), float16 or bfloat16 (``ml_dtypes.bfloat16``)."""

    def __init__(
        self,
        modules: Sequence[LoRAModule],
        *,
        alpha: float,
        use_rslora: bool = False,
        target_modules: Sequence[str] | None = None,
        dtype: Any = "float32",
    ) -> None:
        self._dtype = adapter_dtype(dtype)
        if not modules:
            raise ValueError("a LoRA adapter needs at least one module")
        paths = [m.path for m in modules]
        if len(set(paths)) != len(paths):
            raise ValueError("module paths must be unique")
        ranks = {m.rank for m in modules}
        if len(ranks) != 1 or min(ranks) < 1:
            raise ValueError(f"all modules must share one rank >= 1 (got {sorted(ranks)})")
        if not alpha > 0:
            raise ValueError(f"lora alpha must be > 0 (got {alpha})")
        self.modules = tuple(modules)
        self.rank = modules[0].rank
        self.alpha = float(alpha)
        self.use_rslora = bool(use_rslora)
        self.target_modules = tuple(
            target_modules if target_modules is not None else sorted({p.rsplit(".", 1)[-1] for p in paths})
        )
        # Layout: A then B of each module, each at an aligned offset.
        self._offsets: dict[tuple[str, str], tuple[int, tuple[int, int]]] = {}
        offset = 0
        for m in self.modules:
            for which, shape in (("A", m.a_shape), ("B", m.b_shape)):
                self._offsets[(m.path, which)] = (offset, shape)
                offset += _align(shape[0] * shape[1])
        self.flat_params: Array = np.zeros(offset, fmt.NUMPY_DTYPES[self._dtype])
        self.flat_grads: Array = np.zeros(offset, fmt.NUMPY_DTYPES[self._dtype])
        #: The weights on the application's device, after ``optimizer(manager=...)``.
        self.device_params: Any = None
        self._runtime: Any = None  # the Runtime on the application's manager, once on the device

    # -- construction ----------------------------------------------------------------------

    @classmethod
    def create(
        cls,
        *,
        layers: int,
        in_features: int,
        out_features: int | None = None,
        rank: int = 8,
        alpha: float = 16.0,
        target_modules: Sequence[str] = ("q_proj", "v_proj"),
        use_rslora: bool = False,
        path_template: str = DEFAULT_PATH_TEMPLATE,
        rng: np.random.Generator | None = None,
        features: Mapping[str, tuple[int, int]] | None = None,
        dtype: Any = "float32",
    ) -> LoRAAdapter:
        """A fresh adapter: A Kaiming-uniform (as PEFT: ``a = sqrt(5)``), B zeros.

        ``features`` optionally maps a target module name to its own ``(in, out)``.
        ``dtype``: of the weights and gradients, ``"float32"``, ``"float16"`` or ``"bfloat16"``
        (or such a NumPy dtype); 16-bit adapters are stepped on the host path (no ``manager``).
        """
        if layers < 1:
            raise ValueError(f"layers must be >= 1 (got {layers})")
        if not target_modules:
            raise ValueError("target_modules must name at least one module")
        out_features = in_features if out_features is None else out_features
        modules = []
        for layer in range(layers):
            for name in target_modules:
                fin, fout = (features or {}).get(name, (in_features, out_features))
                modules.append(LoRAModule(path_template.format(layer=layer, module=name), fin, fout, rank))
        adapter = cls(modules, alpha=alpha, use_rslora=use_rslora, target_modules=target_modules, dtype=dtype)
        adapter.reset_parameters(rng)
        return adapter

    def reset_parameters(self, rng: np.random.Generator | None = None) -> None:
        """A ~ Kaiming-uniform(a=sqrt(5)) = U(-1/sqrt(in), 1/sqrt(in)), as torch's Linear and
        PEFT's default init; B = 0, so the adapted model starts equal to the base model. A is
        drawn in float32 and rounded (nearest-even) to the adapter's dtype."""
        rng = rng if rng is not None else np.random.default_rng()
        for m in self.modules:
            bound = 1.0 / math.sqrt(m.in_features)  # gain sqrt(2/(1+5)) * sqrt(3/in)
            self.weight(m.path, "A")[...] = rng.uniform(-bound, bound, m.a_shape).astype(np.float32)
            self.weight(m.path, "B")[...] = 0.0

    # -- access ------------------------------------------------------------------------------

    @property
    def dtype(self) -> str:
        """The dtype of the weights and gradients: "float32", "float16" or "bfloat16"."""
        return self._dtype

    @property
    def scale(self) -> float:
        """alpha / rank, or alpha / sqrt(rank) with rsLoRA (Kalajdzievski 2023)."""
        return self.alpha / (math.sqrt(self.rank) if self.use_rslora else self.rank)

    @property
    def tensor_count(self) -> int:
        """How many LoRA tensors (an A and a B per module) the flat buffer holds."""
        return 2 * len(self.modules)

    def _view(self, flat: Array, path: str, which: str) -> Array:
        try:
            offset, shape = self._offsets[(path, which)]
        except KeyError:
            raise KeyError(
                f"no LoRA tensor {path!r}.{which}; modules: {[m.path for m in self.modules][:4]}..."
            ) from None
        return flat[offset : offset + shape[0] * shape[1]].reshape(shape)

    def weight(self, path: str, which: str) -> Array:
        """The A or B weight of a module: a view into ``flat_params`` (writes go through)."""
        return self._view(self.flat_params, path, which)

    def grad(self, path: str, which: str) -> Array:
        """The gradient of A or B: a view into ``flat_grads``; write gradients here."""
        return self._view(self.flat_grads, path, which)

    def named_tensors(self) -> dict[str, Array]:
        """PEFT key -> weight view, e.g. ``base_model.model.<path>.lora_A.weight``."""
        return {
            peft_key(m.path, which): self.weight(m.path, which) for m in self.modules for which in ("A", "B")
        }

    def slices(self) -> dict[str, tuple[int, tuple[int, int]]]:
        """PEFT key -> (offset, shape) in the flat buffers, in the order of the buffers: each
        module of ``modules`` in turn, its A then its B."""
        return {peft_key(path, which): value for (path, which), value in self._offsets.items()}

    def delta(self, path: str) -> F32:
        """The weight change this adapter applies to a module: ``scale * B @ A``, in float32."""
        b, a = (self.weight(path, w).astype(np.float32) for w in ("B", "A"))
        return (self.scale * (b @ a)).astype(np.float32)

    # -- optimisation ------------------------------------------------------------------------

    def optimizer(self, rule: str = "adamw", *, manager: Any = None, **kwargs: Any) -> Optimizer:
        """An optimizer over the whole adapter: one param (the flat buffer), one dispatch.

        With ``manager`` (the application's ``kp.Manager``) the weights move to that device
        (``device_params``) and stay there: the application's shaders write gradients straight
        into ``opt.grad_buffer()`` (the layout of ``flat_grads``, offsets from :meth:`slices`),
        ``update_lora_adapter(adapter, opt)`` steps with no host copy, and :meth:`pull_params`
        brings the weights back (PEFT saves and checkpoints do that themselves). On-device
        adapters are float32 (a 16-bit one with ``manager`` raises ValueError); without
        ``manager``, ``flat_params`` is stepped in place in the adapter's dtype. ``kwargs`` go to
        :class:`Optimizer` (hyperparameters, ``state_dtype``, ``stochastic_rounding``, ...).
        """
        if manager is None:
            return Optimizer([self.flat_params], rule, **kwargs)
        return Optimizer([self.to_device(manager)], rule, manager=manager, **kwargs)

    def to_device(self, manager: Any) -> Any:
        """Move the weights onto the device of ``manager`` (a ``kp.Manager``) and return the kp
        tensor that holds them there (``device_params``, filled from ``flat_params``), as
        :meth:`optimizer` with ``manager`` does: :meth:`push_params` and :meth:`pull_params` then
        copy between the two, and PEFT saves and checkpoints read the device's copy back. For
        code that builds its own optimizer over the adapter (ZeRO-1). Float32 adapters only (a
        16-bit one raises ValueError)."""
        if self._dtype != "float32":
            raise ValueError(
                f"this adapter is {self._dtype}, but on-device adapters (manager=) are float32: 16-bit "
                "adapters use the host path (manager=None), or create the adapter with dtype='float32'"
            )
        self._runtime = Runtime(manager=manager)
        self.device_params = self._runtime.buffer(self.flat_params)
        self.push_params()
        return self.device_params

    def push_params(self) -> None:
        """Copy ``flat_params`` to ``device_params`` (after editing weights on the host)."""
        if self.device_params is not None:
            host_view(self.device_params)[:] = self.flat_params
            self._runtime.run([self._runtime.upload_op([self.device_params])])

    def pull_params(self) -> None:
        """Copy ``device_params`` back into ``flat_params`` (and so into every weight view)."""
        if self.device_params is not None:
            self._runtime.run([self._runtime.download_op([self.device_params])])
            self.flat_params[:] = host_view(self.device_params)

    # -- PEFT files (the format lives in .peft) --------------------------------------------------

    def peft_config(self) -> dict[str, Any]:
        """The ``adapter_config.json`` PEFT writes for this adapter."""
        return peft_config(
            rank=self.rank, alpha=self.alpha, target_modules=self.target_modules, use_rslora=self.use_rslora
        )

    def save_peft(self, directory: str | Path) -> Path:
        """Write ``adapter_model.safetensors`` (in the adapter's dtype: F32, F16 or BF16) +
        ``adapter_config.json`` (PEFT's layout)."""
        self.pull_params()
        return write_peft(directory, self.named_tensors(), self.peft_config())

    @classmethod
    def load_peft(cls, directory: str | Path, *, dtype: Any = None) -> LoRAAdapter:
        """Read a PEFT LoRA adapter folder (any writer). Bad keys/shapes raise PeftFormatError.

        The adapter's dtype is the file's (F16, BF16 or F32; float32 for mixed dtypes), or
        ``dtype`` when given (values converted, nearest-even)."""
        folder = read_peft(directory, dtype=dtype)
        adapter = cls(
            folder.modules,
            alpha=folder.alpha,
            use_rslora=folder.use_rslora,
            target_modules=folder.target_modules,
            dtype=folder.dtype,
        )
        for path, pair in folder.weights.items():
            for which, value in pair.items():
                adapter.weight(path, which)[...] = value.astype(adapter.flat_params.dtype)
        return adapter

    def same_layout(self, other: LoRAAdapter) -> bool:
        """True when both adapters have the same modules, shapes, alpha and scale rule."""
        return (
            self.modules == other.modules
            and self.alpha == other.alpha
            and self.use_rslora == other.use_rslora
        )

    def __repr__(self) -> str:
        return (
            f"LoRAAdapter({len(self.modules)} modules, {self.tensor_count} tensors, rank={self.rank}, "
            f"alpha={self.alpha}, dtype={self._dtype}, {self.flat_params.size} elements)"
        )


def update_lora_adapter(
    adapter: LoRAAdapter,
    optimizer: Optimizer,
    grads: Mapping[str, Any] | None = None,
    *,
    wait: bool = True,
) -> StepHandle:
    """Step every A and B of every layer in one dispatch (the original ``updateLoRAAdapter``).

    ``grads``: optional PEFT key -> gradient (NumPy array or torch tensor), copied into
    ``adapter.flat_grads``. Without it the gradients already in ``adapter.flat_grads`` are used
    (for a device-resident adapter: those in ``opt.grad_buffer()``). Gradients are consumed: the
    flat gradient buffer is zeroed afterwards when the optimizer zeroes gradients.

    Every gradient is checked before any is written, with :meth:`Optimizer.step`'s rules: the
    adapter's dtype (``adapter.dtype``) is used as is; other float dtypes (NumPy's or torch's)
    are converted to it (nearest-even) with a warning; integer, bool, complex, string and object
    arrays, and torch tensors that require grad, raise TypeError; an unknown key or a wrong
    shape raises ValueError. A closed optimizer raises OptimizerClosedError, also before
    anything is written. If the step itself raises, the gradients written are taken back: a
    call that raises changes nothing.
    """
    if optimizer.closed:
        raise OptimizerClosedError("this optimizer was closed; create a new one")
    on_device = _steps_adapter(adapter, optimizer)
    writes = _checked_grads(adapter, grads) if grads is not None else []
    if on_device and grads is None:
        return optimizer.step(wait=wait)  # gradients already in opt.grad_buffer(), on the device
    flat = adapter.flat_grads
    previous = [(offset, flat[offset : offset + value.size].copy()) for offset, value in writes]
    for offset, value in writes:
        flat[offset : offset + value.size] = value
    try:
        handle = optimizer.step([flat], wait=wait)
    except BaseException:
        # step() refused (say, a learning rate a schedule set out of range): take the gradients
        # back, or the next update would apply them on top of the ones it is given.
        for offset, old in previous:
            flat[offset : offset + old.size] = old
        raise
    if optimizer.zeroes_grad and not handle.skipped:
        flat[...] = 0.0  # the host mirror of the buffer the shader zeroed
    return handle


def _steps_adapter(adapter: LoRAAdapter, optimizer: Optimizer) -> bool:
    """Whether ``optimizer`` steps the adapter's device copy (True) or its host buffer (False);
    ValueError when it was made for something else."""
    target = optimizer.param_groups[0]["params"][0]
    on_device = target is adapter.device_params and target is not None
    if target is not adapter.flat_params and not on_device:
        raise ValueError("this optimizer was not created for this adapter: use adapter.optimizer(...)")
    return on_device


def _checked_grads(adapter: LoRAAdapter, grads: Mapping[str, Any]) -> list[tuple[int, Array]]:
    """Every gradient of ``grads`` checked and made ``adapter.dtype``: (flat offset, flattened values).

    Nothing is written here, so a bad gradient at any key leaves the flat buffer as it was.
    """
    if not isinstance(grads, Mapping):
        raise TypeError(
            f"grads must map PEFT keys (see adapter.slices()) to gradients; got {type(grads).__name__}"
        )
    slices = adapter.slices()
    unknown = sorted((key for key in grads if key not in slices), key=repr)
    if unknown:
        example = next(iter(slices), "")
        near = [k for k in slices if isinstance(unknown[0], str) and unknown[0] and k.endswith(unknown[0])]
        raise ValueError(
            f"gradients for unknown LoRA tensors: {unknown[:5]}; keys are PEFT names, "
            f"'{PEFT_PREFIX}<module path>.lora_A.weight' or '...lora_B.weight', such as {example!r} "
            "(every key: adapter.slices())" + (f"; did you mean {near[0]!r}?" if near else "")
        )
    out: list[tuple[int, Array]] = []
    for key, value in grads.items():
        offset, shape = slices[key]
        array = _grad_array(key, value, shape, adapter.dtype)
        if np.may_share_memory(array, adapter.flat_grads):
            # A view of the flat buffer itself (say, another key's slice): read it before any
            # write can overwrite it.
            array = array.copy()
        out.append((offset, array.reshape(-1)))
    return out


def _grad_array(key: str, value: Any, shape: tuple[int, int], dtype: str) -> Array:
    """One gradient as an array of ``shape`` and ``dtype``, under the dtype rules of Optimizer.step."""
    torch = sys.modules.get("torch")  # a torch tensor can only exist if torch was imported
    if torch is not None and isinstance(value, torch.Tensor):
        if value.requires_grad:
            raise TypeError(f"gradient for {key} is a torch tensor that requires grad; pass tensor.detach()")
        if tuple(value.shape) != shape:
            raise ValueError(f"gradient for {key} has shape {tuple(value.shape)}; expected {shape}")
        if value.dtype != getattr(torch, dtype):
            is_float = value.is_floating_point()
            convert_float_or_refuse(f"gradient for {key}", value.dtype, is_float, to=dtype)
            value = value.to(getattr(torch, dtype))
        value = value.cpu()  # NumPy has no torch bfloat16: the same bits, as ml_dtypes' bfloat16
        value = value.view(torch.int16).numpy().view(fmt.BFLOAT16) if dtype == "bfloat16" else value.numpy()
    try:
        array = np.asarray(value)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"gradient for {key} is not an array ({exc}); expected {dtype} {shape}") from None
    if array.shape != shape:
        raise ValueError(f"gradient for {key} has shape {array.shape}; expected {shape}")
    if array.dtype != fmt.NUMPY_DTYPES[dtype]:
        is_float = np.issubdtype(array.dtype, np.floating) or array.dtype == fmt.BFLOAT16
        convert_float_or_refuse(f"gradient for {key}", array.dtype, is_float, to=dtype)
        array = array.astype(fmt.NUMPY_DTYPES[dtype])
    return array
