"""LoRA adapters in one flat buffer: every A and B of every layer updated by one dispatch.

A LoRA adapter (Hu et al. 2021) adds ``scale * B @ A`` to each frozen target weight
``W [out, in]``, with ``A [rank, in]`` (Kaiming-uniform) and ``B [out, rank]`` (zeros), and
``scale = alpha / rank`` (or ``alpha / sqrt(rank)``, rsLoRA). All A and B tensors of an adapter
live in one float32 array (``flat_params``), each a view at an offset aligned to 64 elements;
their gradients live in ``flat_grads`` with the same layout. An optimizer over the adapter sees
one parameter, so a step is one dispatch whatever the tensor count::

    adapter = LoRAAdapter.create(layers=32, in_features=4096, out_features=4096, rank=16,
                                 target_modules=("q_proj", "k_proj", "v_proj", "o_proj"))
    opt = adapter.optimizer("adamw", lr=1e-4)
    adapter.grad("model.layers.0.self_attn.q_proj", "B")[...] = dB    # write gradients
    update_lora_adapter(adapter, opt)                                  # one dispatch

Files: :meth:`LoRAAdapter.save_peft` / :meth:`LoRAAdapter.load_peft` (PEFT's layout), and
:func:`save_checkpoint` / :func:`load_checkpoint` (adapter + optimizer state + step + RNG).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import sys
import tempfile
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from .._errors import OptimizerClosedError
from .._inputs import convert_float_or_refuse
from .._optim.optimizer import ALIGN_ELEMENTS, Optimizer, StepHandle
from .._runtime import Runtime

Array = npt.NDArray[Any]


F32 = npt.NDArray[np.float32]

#: Module path of target ``module`` in layer ``layer`` (Llama-style names, as PEFT writes them).
DEFAULT_PATH_TEMPLATE = "model.layers.{layer}.self_attn.{module}"
PEFT_PREFIX = "base_model.model."
ADAPTER_WEIGHTS = "adapter_model.safetensors"
ADAPTER_CONFIG = "adapter_config.json"
CHECKPOINT_FORMAT = "vk-adam-checkpoint/2"


class PeftFormatError(ValueError):
    """A PEFT adapter file has unknown or missing keys, wrong shapes, or a bad config."""


class CheckpointError(ValueError):
    """A checkpoint is truncated, corrupted, or does not match the run being resumed.

    The one error :func:`load_checkpoint` raises for a bad file; when it does, nothing changed.
    """


@dataclass(frozen=True)
class LoRAModule:
    """One adapted linear layer: its path and the shapes of its A and B."""

    path: str  # e.g. "model.layers.0.self_attn.q_proj"
    in_features: int
    out_features: int
    rank: int

    @property
    def a_shape(self) -> tuple[int, int]:
        return (self.rank, self.in_features)

    @property
    def b_shape(self) -> tuple[int, int]:
        return (self.out_features, self.rank)


def _align(n: int) -> int:
    return -(-n // ALIGN_ELEMENTS) * ALIGN_ELEMENTS


class LoRAAdapter:
    """All LoRA A/B tensors of a model in one aligned flat float32 buffer (plus gradients)."""

    def __init__(
        self,
        modules: Sequence[LoRAModule],
        *,
        alpha: float,
        use_rslora: bool = False,
        target_modules: Sequence[str] | None = None,
    ) -> None:
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
        self.flat_params: F32 = np.zeros(offset, np.float32)
        self.flat_grads: F32 = np.zeros(offset, np.float32)
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
    ) -> LoRAAdapter:
        """A fresh adapter: A Kaiming-uniform (as PEFT: ``a = sqrt(5)``), B zeros.

        ``features`` optionally maps a target module name to its own ``(in, out)``.
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
        adapter = cls(modules, alpha=alpha, use_rslora=use_rslora, target_modules=target_modules)
        adapter.reset_parameters(rng)
        return adapter

    def reset_parameters(self, rng: np.random.Generator | None = None) -> None:
        """A ~ Kaiming-uniform(a=sqrt(5)) = U(-1/sqrt(in), 1/sqrt(in)), as torch's Linear and
        PEFT's default init; B = 0, so the adapted model starts equal to the base model."""
        rng = rng if rng is not None else np.random.default_rng()
        for m in self.modules:
            bound = 1.0 / math.sqrt(m.in_features)  # gain sqrt(2/(1+5)) * sqrt(3/in)
            self.weight(m.path, "A")[...] = rng.uniform(-bound, bound, m.a_shape).astype(np.float32)
            self.weight(m.path, "B")[...] = 0.0

    # -- access ------------------------------------------------------------------------------

    @property
    def scale(self) -> float:
        """alpha / rank, or alpha / sqrt(rank) with rsLoRA (Kalajdzievski 2023)."""
        return self.alpha / (math.sqrt(self.rank) if self.use_rslora else self.rank)

    @property
    def tensor_count(self) -> int:
        """How many LoRA tensors (an A and a B per module) the flat buffer holds."""
        return 2 * len(self.modules)

    def _view(self, flat: F32, path: str, which: str) -> F32:
        try:
            offset, shape = self._offsets[(path, which)]
        except KeyError:
            raise KeyError(
                f"no LoRA tensor {path!r}.{which}; modules: {[m.path for m in self.modules][:4]}..."
            ) from None
        return flat[offset : offset + shape[0] * shape[1]].reshape(shape)

    def weight(self, path: str, which: str) -> F32:
        """The A or B weight of a module: a view into ``flat_params`` (writes go through)."""
        return self._view(self.flat_params, path, which)

    def grad(self, path: str, which: str) -> F32:
        """The gradient of A or B: a view into ``flat_grads``; write gradients here."""
        return self._view(self.flat_grads, path, which)

    def named_tensors(self) -> dict[str, F32]:
        """PEFT key -> weight view, e.g. ``base_model.model.<path>.lora_A.weight``."""
        return {
            f"{PEFT_PREFIX}{m.path}.lora_{which}.weight": self.weight(m.path, which)
            for m in self.modules
            for which in ("A", "B")
        }

    def slices(self) -> dict[str, tuple[int, tuple[int, int]]]:
        """PEFT key -> (offset, shape) in the flat buffers."""
        return {
            f"{PEFT_PREFIX}{path}.lora_{which}.weight": value
            for (path, which), value in self._offsets.items()
        }

    def delta(self, path: str) -> F32:
        """The weight change this adapter applies to a module: ``scale * B @ A``."""
        return (self.scale * (self.weight(path, "B") @ self.weight(path, "A"))).astype(np.float32)

    # -- optimisation ------------------------------------------------------------------------

    def optimizer(self, rule: str = "adamw", *, manager: Any = None, **kwargs: Any) -> Optimizer:
        """An optimizer over the whole adapter: one param (the flat buffer), one dispatch.

        With ``manager`` (the application's ``kp.Manager``) the weights move to that device
        (``device_params``) and stay there: the application's shaders write gradients straight
        into ``opt.grad_buffer()`` (the layout of ``flat_grads``, offsets from :meth:`slices`),
        ``update_lora_adapter(adapter, opt)`` steps with no host copy, and :meth:`pull_params`
        brings the weights back (PEFT saves and checkpoints do that themselves).
        """
        if manager is None:
            return Optimizer([self.flat_params], rule, **kwargs)
        self._runtime = Runtime(manager=manager)
        self.device_params = self._runtime.buffer(self.flat_params)
        self.push_params()
        return Optimizer([self.device_params], rule, manager=manager, **kwargs)

    def push_params(self) -> None:
        """Copy ``flat_params`` to ``device_params`` (after editing weights on the host)."""
        if self.device_params is not None:
            self.device_params.data()[:] = self.flat_params
            self._runtime.run([self._runtime.upload_op([self.device_params])])

    def pull_params(self) -> None:
        """Copy ``device_params`` back into ``flat_params`` (and so into every weight view)."""
        if self.device_params is not None:
            self._runtime.run([self._runtime.download_op([self.device_params])])
            self.flat_params[:] = self.device_params.data()

    # -- PEFT files ------------------------------------------------------------------------------

    def peft_config(self) -> dict[str, Any]:
        """The ``adapter_config.json`` PEFT writes for this adapter."""
        return {
            "peft_type": "LORA",
            "r": self.rank,
            "lora_alpha": self.alpha,
            "target_modules": list(self.target_modules),
            "use_rslora": self.use_rslora,
            "lora_dropout": 0.0,
            "bias": "none",
            "fan_in_fan_out": False,
            "init_lora_weights": True,
            "inference_mode": True,
            "modules_to_save": None,
            "task_type": None,
            "base_model_name_or_path": None,
            "revision": None,
        }

    def save_peft(self, directory: str | Path) -> Path:
        """Write ``adapter_model.safetensors`` + ``adapter_config.json`` (PEFT's layout)."""
        from safetensors.numpy import save

        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        self.pull_params()
        tensors = {k: np.ascontiguousarray(v) for k, v in self.named_tensors().items()}
        _atomic_write(directory / ADAPTER_WEIGHTS, save(tensors, metadata={"format": "pt"}))
        config = json.dumps(self.peft_config(), indent=2, sort_keys=True).encode()
        _atomic_write(directory / ADAPTER_CONFIG, config)
        return directory

    @classmethod
    def load_peft(cls, directory: str | Path) -> LoRAAdapter:
        """Read a PEFT LoRA adapter folder (any writer). Bad keys/shapes raise PeftFormatError."""
        from safetensors import SafetensorError
        from safetensors.numpy import load_file

        directory = Path(directory)
        try:
            config = json.loads((directory / ADAPTER_CONFIG).read_text())
        except FileNotFoundError:
            raise PeftFormatError(f"{directory / ADAPTER_CONFIG} not found") from None
        except json.JSONDecodeError as exc:
            raise PeftFormatError(f"{directory / ADAPTER_CONFIG} is not valid JSON: {exc}") from None
        if str(config.get("peft_type", "LORA")).upper() != "LORA":
            raise PeftFormatError(f"peft_type is {config.get('peft_type')!r}; only LORA adapters load")
        for key in ("r", "lora_alpha"):
            if key not in config:
                raise PeftFormatError(f"{ADAPTER_CONFIG} lacks {key!r}")
        rank = int(config["r"])
        try:
            tensors = load_file(str(directory / ADAPTER_WEIGHTS))
        except FileNotFoundError:
            raise PeftFormatError(f"{directory / ADAPTER_WEIGHTS} not found") from None
        except (SafetensorError, OSError, ValueError) as exc:
            raise PeftFormatError(f"{directory / ADAPTER_WEIGHTS} is unreadable: {exc}") from None
        pattern = re.compile(r"^base_model\.model\.(?P<path>.+)\.lora_(?P<which>[AB])(?:\.default)?\.weight$")
        found: dict[str, dict[str, Array]] = {}
        unknown = []
        for key, value in tensors.items():
            match = pattern.match(key)
            if match is None:
                unknown.append(key)
                continue
            found.setdefault(match["path"], {})[match["which"]] = value
        if unknown:
            raise PeftFormatError(f"unknown keys in {ADAPTER_WEIGHTS}: {sorted(unknown)}")
        targets = config.get("target_modules")
        modules = []
        order = list(targets) if isinstance(targets, list) else []

        def module_order(path: str) -> tuple[Any, ...]:
            # Layer by layer (natural order), then the config's target_modules order: the
            # layout LoRAAdapter.create gives, so a saved adapter reloads with the same layout.
            prefix, _, name = path.rpartition(".")
            return (_natural_key(prefix), order.index(name) if name in order else len(order), name)

        for path in sorted(found, key=module_order):
            pair = found[path]
            missing = [f"{PEFT_PREFIX}{path}.lora_{w}.weight" for w in ("A", "B") if w not in pair]
            if missing:
                raise PeftFormatError(f"missing keys in {ADAPTER_WEIGHTS}: {missing}")
            a, b = pair["A"], pair["B"]
            if a.ndim != 2 or b.ndim != 2 or a.shape[0] != rank or b.shape[1] != rank:
                raise PeftFormatError(
                    f"{path}: lora_A {a.shape} must be [r={rank}, in] and lora_B {b.shape} [out, r={rank}]"
                )
            if isinstance(targets, list) and targets and path.rsplit(".", 1)[-1] not in targets:
                raise PeftFormatError(f"{path} is not one of target_modules {targets}")
            modules.append(LoRAModule(path, int(a.shape[1]), int(b.shape[0]), rank))
        if not modules:
            raise PeftFormatError(f"{ADAPTER_WEIGHTS} holds no LoRA tensors")
        adapter = cls(
            modules,
            alpha=float(config["lora_alpha"]),
            use_rslora=bool(config.get("use_rslora", False)),
            target_modules=targets if isinstance(targets, list) else None,
        )
        for path, pair in found.items():
            adapter.weight(path, "A")[...] = pair["A"].astype(np.float32)
            adapter.weight(path, "B")[...] = pair["B"].astype(np.float32)
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
            f"alpha={self.alpha}, {self.flat_params.size} elements)"
        )


def _natural_key(text: str) -> list[Any]:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", text)]


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

    Every gradient is checked before any is written, with :meth:`Optimizer.step`'s rules:
    float32 is used as is; other float dtypes (torch's bfloat16 included) are converted with a
    warning; integer, bool, complex, string and object arrays, and torch tensors that require
    grad, raise TypeError; an unknown key or a wrong shape raises ValueError. A closed optimizer
    raises OptimizerClosedError, also before anything is written. If the step itself raises,
    the gradients written are taken back: a call that raises changes nothing.
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


def _checked_grads(adapter: LoRAAdapter, grads: Mapping[str, Any]) -> list[tuple[int, F32]]:
    """Every gradient of ``grads`` checked and made float32: (flat offset, flattened values).

    Nothing is written here, so a bad gradient at any key leaves the flat buffer as it was.
    """
    if not isinstance(grads, Mapping):
        raise TypeError(
            f"grads must map PEFT keys (see adapter.slices()) to gradients; got {type(grads).__name__}"
        )
    slices = adapter.slices()
    unknown = sorted((key for key in grads if key not in slices), key=repr)
    if unknown:
        raise ValueError(f"gradients for unknown LoRA tensors: {unknown[:5]}")
    out: list[tuple[int, F32]] = []
    for key, value in grads.items():
        offset, shape = slices[key]
        array = _grad_array(key, value, shape)
        if np.may_share_memory(array, adapter.flat_grads):
            # A view of the flat buffer itself (say, another key's slice): read it before any
            # write can overwrite it.
            array = array.copy()
        out.append((offset, array.reshape(-1)))
    return out


def _grad_array(key: str, value: Any, shape: tuple[int, int]) -> F32:
    """One gradient as a float32 array of ``shape``, under the dtype rules of Optimizer.step."""
    torch = sys.modules.get("torch")  # a torch tensor can only exist if torch was imported
    if torch is not None and isinstance(value, torch.Tensor):
        if value.requires_grad:
            raise TypeError(f"gradient for {key} is a torch tensor that requires grad; pass tensor.detach()")
        if tuple(value.shape) != shape:
            raise ValueError(f"gradient for {key} has shape {tuple(value.shape)}; expected {shape}")
        if value.dtype != torch.float32:
            convert_float_or_refuse(
                f"gradient for {key}", value.dtype, value.is_floating_point(), stacklevel=4
            )
            value = value.to(torch.float32)
        array: Array = value.cpu().numpy()
        return array
    try:
        array = np.asarray(value)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"gradient for {key} is not an array ({exc}); expected float32 {shape}") from None
    if array.shape != shape:
        raise ValueError(f"gradient for {key} has shape {array.shape}; expected {shape}")
    if array.dtype != np.float32:
        convert_float_or_refuse(
            f"gradient for {key}", array.dtype, np.issubdtype(array.dtype, np.floating), stacklevel=4
        )
        array = array.astype(np.float32)
    return array


# -- optimizer state by parameter name --------------------------------------------------------


def _state_by_name(adapter: LoRAAdapter, optimizer: Optimizer) -> tuple[int, dict[str, dict[str, F32]]]:
    sd = optimizer.state_dict()
    flat_state = sd["state"].get(0)
    if flat_state is None:
        return 0, {}
    step = int(flat_state["step"])
    out: dict[str, dict[str, F32]] = {}
    for key, (offset, shape) in adapter.slices().items():
        out[key] = {
            name: value[offset : offset + shape[0] * shape[1]].reshape(shape).copy()
            for name, value in flat_state.items()
            if name != "step"
        }
    return step, out


def _load_state_by_name(
    adapter: LoRAAdapter,
    optimizer: Optimizer,
    step: int,
    state: Mapping[str, Mapping[str, Array]],
    hyper: Mapping[str, Any] | None = None,
) -> None:
    """Load per-name state (and hyperparameters) into the flat optimizer, all or nothing."""
    names = optimizer.rule.state_names(optimizer.param_groups[0])
    slices = adapter.slices()
    flat: dict[str, Any] = {}
    if step > 0:
        missing = sorted(set(slices) - set(state))
        unknown = sorted(set(state) - set(slices))
        if missing or unknown:
            raise CheckpointError(
                f"optimizer state does not match the adapter: missing {missing[:5]}, unknown {unknown[:5]}"
            )
        flat["step"] = float(step)
        for name in names:
            buffer = np.zeros(adapter.flat_params.size, np.float32)
            for key, (offset, shape) in slices.items():
                if name not in state[key]:
                    raise CheckpointError(f"optimizer state of {key} lacks {name!r}")
                value = np.asarray(state[key][name], np.float32)
                if value.shape != shape:
                    raise CheckpointError(
                        f"state {name!r} of {key} has shape {value.shape}; expected {shape}"
                    )
                buffer[offset : offset + shape[0] * shape[1]] = value.reshape(-1)
            flat[name] = buffer
    # Only the hyperparameters are needed here: build them without state_dict(), which would
    # download every state buffer from the device first.
    groups = [
        {k: v for k, v in g.items() if k != "params"} | {"params": [i]}
        for i, g in enumerate(optimizer.param_groups)
    ]
    if hyper:
        groups[0].update(
            {k: (tuple(v) if isinstance(v, list) else v) for k, v in hyper.items() if k in groups[0]}
        )
    try:
        optimizer.load_state_dict({"state": {0: flat} if flat else {}, "param_groups": groups})
    except ValueError as exc:
        raise CheckpointError(str(exc)) from exc


def export_torch_adamw_state(adapter: LoRAAdapter, optimizer: Optimizer) -> dict[str, Any]:
    """A ``torch.optim.AdamW.state_dict()`` for the adapter's tensors in ``named_tensors()`` order.

    Load it into ``torch.optim.AdamW(params_in_that_order)``; values are torch tensors.
    """
    import torch

    step, state = _state_by_name(adapter, optimizer)
    keys = list(adapter.named_tensors())
    group = {k: v for k, v in optimizer.param_groups[0].items() if k != "params"}
    group["betas"] = tuple(group["betas"])
    torch_state = {}
    if step:
        for i, key in enumerate(keys):
            torch_state[i] = {"step": torch.tensor(float(step))}
            torch_state[i].update({n: torch.from_numpy(v.copy()) for n, v in state[key].items()})
    group.update(
        {
            "foreach": None,
            "capturable": False,
            "differentiable": False,
            "fused": None,
            "params": list(range(len(keys))),
        }
    )
    return {"state": torch_state, "param_groups": [group]}


def import_torch_adamw_state(
    adapter: LoRAAdapter, optimizer: Optimizer, torch_state_dict: Mapping[str, Any]
) -> None:
    """Load a torch.optim.AdamW state dict whose params are the adapter's tensors in
    ``named_tensors()`` order (one param group)."""
    groups = list(torch_state_dict["param_groups"])
    keys = list(adapter.named_tensors())
    if len(groups) != 1 or len(groups[0]["params"]) != len(keys):
        raise ValueError(f"expected one param group of {len(keys)} params (the adapter's tensors in order)")
    ids = list(groups[0]["params"])
    steps = set()
    state: dict[str, dict[str, Array]] = {}
    for key, pid in zip(keys, ids, strict=True):
        entry = torch_state_dict["state"].get(pid)
        if entry is None:
            steps.add(0)
            continue
        steps.add(int(float(entry["step"])))
        state[key] = {
            n: np.asarray(v.detach().cpu().numpy() if hasattr(v, "detach") else v, np.float32)
            for n, v in entry.items()
            if n != "step"
        }
    if len(steps) != 1:
        raise ValueError(f"params are at different steps {sorted(steps)}; vk-adam keeps one per group")
    hyper = {k: groups[0][k] for k in ("lr", "betas", "eps", "weight_decay") if k in groups[0]}
    _load_state_by_name(adapter, optimizer, steps.pop(), state, hyper)


# -- checkpoints ---------------------------------------------------------------------------------
#
# A checkpoint is a safetensors file: tensors ``param/<peft key>`` and ``state/<name>/<peft key>``
# (float32), and two metadata entries: ``vk_adam`` (JSON: format, rule, step, hyperparameters,
# LoRA config, module layout, RNG state, extra) and ``vk_adam_sha256``, the SHA-256 of the whole
# file as written with those 64 hex digits set to "0". The checksum so covers every byte that
# loading reads: the header, both metadata entries and all tensor data.

#: Metadata key of the whole-file checksum.
CHECKSUM_KEY = "vk_adam_sha256"
# Where the digest sits in the header: serialised metadata keys are JSON strings, and a quote
# inside any other key or value is escaped, so this pattern can only match the key itself.
_CHECKSUM_FIELD = re.compile(rf'"{re.escape(CHECKSUM_KEY)}"\s*:\s*"'.encode())
_CHECKSUM_PLACEHOLDER = b"0" * 64
#: Formats whose metadata is not covered by their checksum: refused, as they cannot be verified.
UNVERIFIABLE_FORMATS = ("vk-adam-checkpoint/1",)
# Bigger integers are not exactly representable as the float the optimizer stores its step in.
_MAX_EXACT_INT = 2**53


def _temp_file_pattern(path: Path) -> re.Pattern[str]:
    # mkstemp's random part has no dots, so the temp files of another checkpoint whose name
    # starts with this one's (``c.safetensors.bak``) never match.
    return re.compile(rf"\.{re.escape(path.name)}\.[A-Za-z0-9_]+\.tmp")


def _remove_orphaned_temp_files(path: Path) -> None:
    """Delete temp files that an interrupted write of ``path`` (say, a SIGKILL) left behind.

    One writer per file is assumed: a concurrent save of the same path would lose its temp file.
    """
    pattern = _temp_file_pattern(path)
    try:
        entries = list(os.scandir(path.parent))
    except OSError:
        return  # no folder (yet), or unreadable: nothing we could clean
    for entry in entries:
        if pattern.fullmatch(entry.name) and entry.is_file(follow_symlinks=False):
            try:
                os.unlink(entry.path)
            except OSError:
                pass  # best effort: a stale temp file must not stop a save or a load


def _atomic_write(path: Path, data: bytes) -> None:
    """Write via a temp file in the same folder, fsync, rename: readers see old or new, never half.

    Temp files that an earlier, killed write of ``path`` left are removed first; this write's
    own temp file is removed if it fails.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    _remove_orphaned_temp_files(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _checksum_position(data: bytes) -> int | None:
    """Offset of the 64 hex digits of the checksum in a safetensors file, or None if it has none.

    Raises CheckpointError for a file too short for its own header, or with two checksums.
    """
    if len(data) < 8:
        raise CheckpointError(f"the file has {len(data)} bytes: it is truncated")
    header_size = int.from_bytes(data[:8], "little")
    if header_size > len(data) - 8:
        raise CheckpointError(
            f"its header claims {header_size} bytes and the file has {len(data)}: it is truncated "
            "or corrupted"
        )
    fields = list(_CHECKSUM_FIELD.finditer(data, 8, 8 + header_size))
    if not fields:
        return None
    if len(fields) > 1:
        raise CheckpointError("its header holds two checksums: it is corrupted")
    return fields[0].end()


def _file_digest(data: bytes, position: int) -> bytes:
    """SHA-256 (hex) of ``data`` with the 64 bytes at ``position`` read as "0"s."""
    view = memoryview(data)
    h = hashlib.sha256()
    h.update(view[:position])
    h.update(_CHECKSUM_PLACEHOLDER)
    h.update(view[position + 64 :])
    return h.hexdigest().encode()


def _seal(data: bytes) -> bytes:
    """Fill in the checksum of a file serialised with the placeholder digest."""
    position = _checksum_position(data)
    if position is None or data[position : position + 64] != _CHECKSUM_PLACEHOLDER:
        raise RuntimeError("safetensors wrote the checkpoint's header in a layout vk-adam does not know")
    return data[:position] + _file_digest(data, position) + data[position + 64 :]


def save_checkpoint(
    path: str | Path,
    adapter: LoRAAdapter,
    optimizer: Optimizer,
    *,
    rng: np.random.Generator | None = None,
    extra: Mapping[str, Any] | None = None,
) -> Path:
    """Save adapter weights, optimizer state, step, hyperparameters and RNG state, keyed by
    parameter name, to one safetensors file, atomically (temp file, fsync, rename).

    A SHA-256 of the whole file (metadata included) is stored in it; :func:`load_checkpoint`
    verifies it. Temp files left by an earlier, interrupted save of ``path`` are removed.
    ``extra`` must be JSON-serialisable.
    """
    from safetensors.numpy import save

    _steps_adapter(adapter, optimizer)
    step, state = _state_by_name(adapter, optimizer)
    adapter.pull_params()
    tensors: dict[str, Array] = {}
    for key, weight in adapter.named_tensors().items():
        tensors[f"param/{key}"] = np.ascontiguousarray(weight)
        for name, value in state.get(key, {}).items():
            tensors[f"state/{name}/{key}"] = value
    group = {k: v for k, v in optimizer.param_groups[0].items() if k != "params"}
    meta = {
        "format": CHECKPOINT_FORMAT,
        "rule": optimizer.rule.name,
        "step": step,
        "hyperparameters": group,
        "adapter": adapter.peft_config(),
        "modules": [[m.path, m.in_features, m.out_features, m.rank] for m in adapter.modules],
        "rng": rng.bit_generator.state if rng is not None else None,
        "extra": dict(extra or {}),
    }
    metadata = {
        "vk_adam": json.dumps(meta, default=_json_default),
        CHECKSUM_KEY: _CHECKSUM_PLACEHOLDER.decode(),
    }
    path = Path(path)
    _atomic_write(path, _seal(save(tensors, metadata=metadata)))
    return path


def _json_default(obj: Any) -> Any:
    if isinstance(obj, (np.integer, np.floating, np.bool_)):
        return obj.item()
    if isinstance(obj, np.ndarray):  # e.g. Philox's RNG state holds arrays
        return obj.tolist()
    if isinstance(obj, tuple):
        return list(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


@dataclass(frozen=True)
class Checkpoint:
    """What load_checkpoint restored: the step to resume from, the RNG state, extra metadata."""

    step: int
    rng_state: dict[str, Any] | None
    extra: dict[str, Any]


@dataclass(frozen=True)
class _VerifiedCheckpoint:
    """A checkpoint checked against the adapter and optimizer: applying it cannot fail on its content."""

    step: int
    state_dict: dict[str, Any]
    flat_params: F32
    rng_state: dict[str, Any] | None
    extra: dict[str, Any]


def load_checkpoint(
    path: str | Path,
    adapter: LoRAAdapter,
    optimizer: Optimizer,
    *,
    rng: np.random.Generator | None = None,
) -> Checkpoint:
    """Restore a :func:`save_checkpoint` file into ``adapter``/``optimizer`` (and ``rng``).

    Everything is verified before anything changes: the whole-file checksum, then the format,
    rule, step, hyperparameters (valid, and selecting the optimizer's shader), the LoRA rank,
    ``lora_alpha`` and ``use_rslora`` (the adapter's scale), the module layout, the name, dtype
    and shape of every tensor, and the RNG state (it must be for ``rng``'s bit generator; a
    checkpoint saved without one cannot restore ``rng``). A truncated, corrupted or mismatched
    file raises :class:`CheckpointError`, and then the adapter's weights, the optimizer's state,
    step and hyperparameters, and ``rng`` are exactly as they were. Files of format
    ``vk-adam-checkpoint/1`` (whose checksum did not cover their metadata) are refused.
    Temp files left by an interrupted save of ``path`` are removed.

    A closed optimizer raises OptimizerClosedError; an optimizer that was not made by
    ``adapter.optimizer(...)`` raises ValueError.
    """
    if optimizer.closed:
        raise OptimizerClosedError("this optimizer was closed; create a new one")
    _steps_adapter(adapter, optimizer)
    path = Path(path)
    _remove_orphaned_temp_files(path)
    try:
        verified = _verify_checkpoint(path, adapter, optimizer, rng)
    except CheckpointError:
        raise
    except Exception as exc:
        # A file whose checksum matches but whose content breaks a rule no check above names
        # (a hand-made file, or a bug): still the one documented error, and nothing changed.
        raise CheckpointError(f"{path} is malformed ({type(exc).__name__}: {exc})") from exc
    # Verified: apply. The optimizer's load goes first (it is all-or-nothing itself); the rest
    # cannot fail on the checkpoint's content.
    try:
        optimizer.load_state_dict(verified.state_dict)
    except (TypeError, ValueError) as exc:
        raise CheckpointError(f"{path}: the optimizer refused its state ({exc})") from exc
    adapter.flat_params[...] = verified.flat_params
    adapter.push_params()
    if rng is not None and verified.rng_state is not None:  # verified: not None when rng is given
        rng.bit_generator.state = verified.rng_state
    return Checkpoint(verified.step, verified.rng_state, verified.extra)


def _read_verified(path: Path) -> tuple[dict[str, Any], dict[str, Array]]:
    """The metadata and tensors of a checkpoint file whose whole-file checksum matches."""
    from safetensors.numpy import load

    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise CheckpointError(f"checkpoint {path} not found") from None
    except OSError as exc:
        raise CheckpointError(f"checkpoint {path} cannot be read: {exc}") from None
    try:
        position = _checksum_position(data)
    except CheckpointError as exc:
        raise CheckpointError(f"checkpoint {path}: {exc}; keep using the previous one") from None
    if position is None:
        fmt = _unverified_format(data)
        if fmt in UNVERIFIABLE_FORMATS:
            raise CheckpointError(
                f"{path} is a {fmt} checkpoint, from an earlier vk-adam: its checksum does not cover "
                "its metadata (step, hyperparameters, RNG), so it cannot be verified and is refused; "
                "resume from a checkpoint saved by this version"
            )
        raise CheckpointError(
            f"{path} carries no vk-adam checksum: it is not a vk-adam checkpoint, or it is corrupted"
        )
    stored = data[position : position + 64]
    if stored != _file_digest(data, position):
        raise CheckpointError(
            f"{path}: checksum mismatch: the file is truncated or corrupted; keep using the previous "
            "checkpoint"
        )
    # From here the bytes are exactly what save_checkpoint wrote (or a hand-made file whose
    # checksum was recomputed): the checks below guard against the latter.
    header = json.loads(data[8 : 8 + int.from_bytes(data[:8], "little")])
    metadata = header.get("__metadata__") if isinstance(header, dict) else None
    raw_meta = metadata.get("vk_adam") if isinstance(metadata, dict) else None
    if not isinstance(raw_meta, str):
        raise CheckpointError(f"{path} is a safetensors file but not a vk-adam checkpoint")
    meta = json.loads(raw_meta)
    if not isinstance(meta, dict):
        raise CheckpointError(f"{path}: its metadata is not a JSON object")
    return meta, load(data)


def _unverified_format(data: bytes) -> str | None:
    """The format a file without a checksum claims to be (only to word the error), or None."""
    try:
        header = json.loads(data[8 : 8 + int.from_bytes(data[:8], "little")])
        fmt = json.loads(header["__metadata__"]["vk_adam"])["format"]
    except Exception:
        return None
    return fmt if isinstance(fmt, str) else None


def _verify_checkpoint(
    path: Path, adapter: LoRAAdapter, optimizer: Optimizer, rng: np.random.Generator | None
) -> _VerifiedCheckpoint:
    """Check a checkpoint against ``adapter``/``optimizer``/``rng``; change nothing."""
    meta, tensors = _read_verified(path)
    if meta.get("format") != CHECKPOINT_FORMAT:
        raise CheckpointError(f"{path}: unknown checkpoint format {meta.get('format')!r}")
    missing_fields = [k for k in ("rule", "step", "hyperparameters", "adapter", "modules") if k not in meta]
    if missing_fields:
        raise CheckpointError(f"{path}: its metadata lacks {missing_fields}")
    if meta["rule"] != optimizer.rule.name:
        raise CheckpointError(
            f"{path} was written by rule {meta['rule']!r}; this optimizer runs {optimizer.rule.name!r}"
        )
    step = meta["step"]
    if not _is_int(step) or not 0 <= step <= _MAX_EXACT_INT:
        raise CheckpointError(f"{path}: step {step!r} is not a whole number >= 0")
    _verify_lora_config(path, adapter, meta["adapter"])
    saved_modules = meta["modules"] if isinstance(meta["modules"], list) else []
    current = [[m.path, m.in_features, m.out_features, m.rank] for m in adapter.modules]
    # (equal lists can still differ in kind: JSON's true compares equal to a size of 1)
    if saved_modules != current or not all(_is_int(v) for m in saved_modules for v in m[1:]):
        saved_paths = {m[0] for m in saved_modules if isinstance(m, list) and m and isinstance(m[0], str)}
        current_paths = {m.path for m in adapter.modules}
        raise CheckpointError(
            f"{path} holds a different adapter layout (missing modules "
            f"{sorted(current_paths - saved_paths)[:4]}, unknown {sorted(saved_paths - current_paths)[:4]}, "
            "or different shapes)"
        )
    options = _verify_hyperparameters(path, optimizer, meta["hyperparameters"])
    rng_state = _verify_rng_state(path, meta.get("rng"), rng)
    extra = meta.get("extra", {})
    if not isinstance(extra, dict):
        raise CheckpointError(f"{path}: 'extra' is {type(extra).__name__}; expected a JSON object")

    # Tensors: exactly the adapter's params, and the rule's state once a step was taken.
    slices = adapter.slices()
    names = optimizer.rule.state_names(options) if step > 0 else ()
    expected: dict[str, tuple[int, int]] = {}
    for key, (_, shape) in slices.items():
        expected[f"param/{key}"] = shape
        expected.update({f"state/{name}/{key}": shape for name in names})
    missing = sorted(set(expected) - set(tensors))
    unknown = sorted(set(tensors) - set(expected))
    if missing or unknown:
        raise CheckpointError(
            f"{path} does not match this adapter and optimizer at step {step}: missing tensors "
            f"{missing[:3]}, unexpected tensors {unknown[:3]}"
        )
    for name, shape in expected.items():
        value = tensors[name]
        if value.dtype != np.float32 or value.shape != shape:
            raise CheckpointError(
                f"{path}: tensor {name} is {value.dtype} {list(value.shape)}; expected float32 {list(shape)}"
            )
    flat_params = adapter.flat_params.copy()  # keeps the alignment padding between tensors
    flat_state = {name: np.zeros(adapter.flat_params.size, np.float32) for name in names}
    for key, (offset, shape) in slices.items():
        end = offset + shape[0] * shape[1]
        flat_params[offset:end] = tensors[f"param/{key}"].reshape(-1)
        for name in names:
            flat_state[name][offset:end] = tensors[f"state/{name}/{key}"].reshape(-1)

    # The state dict for Optimizer.load_state_dict: group 0 is the adapter's flat buffer.
    groups = []
    start = 0
    for index, group in enumerate(optimizer.param_groups):
        opts = options if index == 0 else {k: v for k, v in group.items() if k != "params"}
        groups.append({**opts, "params": list(range(start, start + len(group["params"])))})
        start += len(group["params"])
    state: dict[int, dict[str, Any]] = {0: {"step": float(step), **flat_state}} if step > 0 else {}
    return _VerifiedCheckpoint(
        step, {"state": state, "param_groups": groups}, flat_params, rng_state, dict(extra)
    )


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _verify_lora_config(path: Path, adapter: LoRAAdapter, config: Any) -> None:
    """The saved LoRA rank and scale settings must be the adapter's: a checkpoint trained with
    another ``alpha`` or ``use_rslora`` would resume with another scale."""
    if not isinstance(config, dict):
        raise CheckpointError(f"{path}: its LoRA config is not a JSON object")
    rank, alpha, rslora = config.get("r"), config.get("lora_alpha"), config.get("use_rslora")
    if not _is_int(rank) or rank != adapter.rank:
        raise CheckpointError(f"{path} holds a rank-{rank!r} adapter; this adapter has rank {adapter.rank}")
    if not (isinstance(alpha, (int, float)) and not isinstance(alpha, bool)) or alpha != adapter.alpha:
        raise CheckpointError(
            f"{path} was saved with lora_alpha={alpha!r}; this adapter has lora_alpha={adapter.alpha} "
            f"(scale {adapter.scale}): create the adapter with the checkpoint's alpha"
        )
    if not isinstance(rslora, bool) or rslora != adapter.use_rslora:
        raise CheckpointError(
            f"{path} was saved with use_rslora={rslora!r}; this adapter has use_rslora={adapter.use_rslora} "
            f"(scale {adapter.scale}): create the adapter with the checkpoint's setting"
        )


def _verify_hyperparameters(path: Path, optimizer: Optimizer, saved: Any) -> dict[str, Any]:
    """The optimizer's hyperparameters with the saved ones merged in, each of the kind the
    optimizer holds, valid for its rule, and selecting the same shader."""
    if not isinstance(saved, dict):
        raise CheckpointError(f"{path}: its hyperparameters are not a JSON object")
    rule = optimizer.rule
    current = {k: v for k, v in optimizer.param_groups[0].items() if k != "params"}
    unknown = sorted(set(saved) - set(current))
    if unknown:
        raise CheckpointError(f"{path}: hyperparameters {unknown[:5]} are unknown to rule {rule.name!r}")
    options = dict(current)
    for key, value in saved.items():
        options[key] = _like(path, key, value, current[key])
    try:
        rule.validate(options)
    except (TypeError, ValueError, KeyError) as exc:
        raise CheckpointError(f"{path}: invalid hyperparameters ({exc})") from None
    if rule.variant_for(options) is not rule.variant_for(current) or tuple(
        rule.spec_constants(options)
    ) != tuple(rule.spec_constants(current)):
        changed = {k: v for k, v in saved.items() if options[k] != current[k]}
        raise CheckpointError(
            f"{path} was saved with options that select another shader (of {changed}); create the "
            "optimizer with the options of the one that saved it"
        )
    return options


def _like(path: Path, key: str, value: Any, current: Any) -> Any:
    """A saved hyperparameter as the optimizer holds it (JSON has lists, not tuples); refuse one
    of another kind (a string learning rate, a bool momentum, an int too big for a float)."""

    def number(v: Any) -> bool:
        return isinstance(v, float) or (_is_int(v) and abs(v) <= _MAX_EXACT_INT)

    if isinstance(current, bool):
        ok = isinstance(value, bool)
    elif isinstance(current, (int, float)):
        ok = number(value)
    elif isinstance(current, (tuple, list)):
        ok = isinstance(value, list) and len(value) == len(current) and all(number(v) for v in value)
        if ok:
            value = type(current)(value)
    else:
        ok = type(value) is type(current)
    if not ok:
        raise CheckpointError(
            f"{path}: hyperparameter {key!r} is {value!r}; expected a value like {current!r}"
        )
    return value


def _verify_rng_state(path: Path, saved: Any, rng: np.random.Generator | None) -> dict[str, Any] | None:
    """The saved RNG state, checked by loading it into a scratch bit generator of its kind."""
    if saved is None:
        if rng is not None:
            raise CheckpointError(
                f"{path} holds no RNG state (it was saved without rng=), so it cannot restore the "
                "generator passed; load it with rng=None"
            )
        return None
    name = saved.get("bit_generator") if isinstance(saved, dict) else None
    kind = getattr(np.random, name, None) if isinstance(name, str) else None
    if not (isinstance(kind, type) and issubclass(kind, np.random.BitGenerator)):
        raise CheckpointError(f"{path}: unknown RNG bit generator {name!r}")
    if rng is not None and type(rng.bit_generator) is not kind:
        raise CheckpointError(
            f"{path} holds a {name} RNG state; the generator passed uses {type(rng.bit_generator).__name__}"
        )
    try:
        with warnings.catch_warnings():
            # NumPy only warns (for now) about some out-of-range values: those are malformed too.
            warnings.simplefilter("error")
            scratch = kind()
            scratch.state = saved
    except Exception as exc:  # numpy raises ValueError, TypeError, KeyError or OverflowError
        raise CheckpointError(f"{path}: its {name} RNG state is malformed ({exc})") from None
    state: dict[str, Any] = saved
    return state
