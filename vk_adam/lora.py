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
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ._device import kp_module
from ._optimizer import ALIGN_ELEMENTS, Optimizer, StepHandle

Array = npt.NDArray[Any]

__all__ = [
    "Checkpoint",
    "CheckpointError",
    "LoRAAdapter",
    "LoRAModule",
    "PeftFormatError",
    "export_torch_adamw_state",
    "import_torch_adamw_state",
    "load_checkpoint",
    "save_checkpoint",
    "update_lora_adapter",
]

F32 = npt.NDArray[np.float32]

#: Module path of target ``module`` in layer ``layer`` (Llama-style names, as PEFT writes them).
DEFAULT_PATH_TEMPLATE = "model.layers.{layer}.self_attn.{module}"
PEFT_PREFIX = "base_model.model."
ADAPTER_WEIGHTS = "adapter_model.safetensors"
ADAPTER_CONFIG = "adapter_config.json"
CHECKPOINT_FORMAT = "vk-adam-checkpoint/1"


class PeftFormatError(ValueError):
    """A PEFT adapter file has unknown or missing keys, wrong shapes, or a bad config."""


class CheckpointError(ValueError):
    """A checkpoint is truncated, corrupted, or does not match the run being resumed."""


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
        self._manager: Any = None

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
        self.device_params = manager.tensor(self.flat_params.copy())
        self._manager = manager
        self.push_params()
        return Optimizer([self.device_params], rule, manager=manager, **kwargs)

    def push_params(self) -> None:
        """Copy ``flat_params`` to ``device_params`` (after editing weights on the host)."""
        if self.device_params is not None:
            self.device_params.data()[:] = self.flat_params
            self._sync(kp_module().OpTensorSyncDevice([self.device_params]))

    def pull_params(self) -> None:
        """Copy ``device_params`` back into ``flat_params`` (and so into every weight view)."""
        if self.device_params is not None:
            self._sync(kp_module().OpTensorSyncLocal([self.device_params]))
            self.flat_params[:] = self.device_params.data()

    def _sync(self, op: Any) -> None:
        seq = self._manager.sequence()
        try:
            seq.eval(op)
        finally:
            seq.destroy()

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
    grads: Mapping[str, Array] | None = None,
    *,
    wait: bool = True,
) -> StepHandle:
    """Step every A and B of every layer in one dispatch (the original ``updateLoRAAdapter``).

    ``grads``: optional PEFT key -> gradient; they are copied into ``adapter.flat_grads``
    (all checked first: unknown keys or wrong shapes raise and change nothing). Without it the
    gradients already in ``adapter.flat_grads`` are used. Gradients are consumed: the flat
    gradient buffer is zeroed afterwards when the optimizer zeroes gradients.
    """
    target = optimizer.param_groups[0]["params"][0]
    on_device = target is adapter.device_params and target is not None
    if target is not adapter.flat_params and not on_device:
        raise ValueError("this optimizer was not created for this adapter: use adapter.optimizer(...)")
    if on_device and grads is None:
        return optimizer.step(wait=wait)  # gradients already in opt.grad_buffer(), on the device
    if grads is not None:
        slices = adapter.slices()
        unknown = sorted(set(grads) - set(slices))
        if unknown:
            raise ValueError(f"gradients for unknown LoRA tensors: {unknown[:5]}")
        for key, value in grads.items():
            if np.shape(value) != slices[key][1]:
                raise ValueError(f"gradient for {key} has shape {np.shape(value)}; expected {slices[key][1]}")
        for key, value in grads.items():
            offset, shape = slices[key]
            adapter.flat_grads[offset : offset + shape[0] * shape[1]] = np.asarray(value, np.float32).reshape(
                -1
            )
    handle = optimizer.step([adapter.flat_grads], wait=wait)
    if optimizer.zeroes_grad and not handle.skipped:
        adapter.flat_grads[...] = 0.0  # the host mirror of the buffer the shader zeroed
    return handle


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


def _atomic_write(path: Path, data: bytes) -> None:
    """Write via a temp file in the same folder, fsync, rename: readers see old or new, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
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


def _digest(tensors: Mapping[str, Array]) -> str:
    h = hashlib.sha256()
    for key in sorted(tensors):
        h.update(key.encode())
        h.update(np.ascontiguousarray(tensors[key]).tobytes())
    return h.hexdigest()


def save_checkpoint(
    path: str | Path,
    adapter: LoRAAdapter,
    optimizer: Optimizer,
    *,
    rng: np.random.Generator | None = None,
    extra: Mapping[str, Any] | None = None,
) -> Path:
    """Save adapter weights, optimizer state, step, hyperparameters and RNG state, keyed by
    parameter name, to one safetensors file, atomically (temp file, fsync, rename)."""
    from safetensors.numpy import save

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
        "sha256": _digest(tensors),
    }
    path = Path(path)
    _atomic_write(path, save(tensors, metadata={"vk_adam": json.dumps(meta, default=_json_default)}))
    return path


def _json_default(obj: Any) -> Any:
    if isinstance(obj, (np.integer, np.floating)):
        return obj.item()
    if isinstance(obj, tuple):
        return list(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


@dataclass(frozen=True)
class Checkpoint:
    """What load_checkpoint restored: the step to resume from, the RNG state, extra metadata."""

    step: int
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

    Everything is verified (format, checksum, rule, module names and shapes) before anything
    changes; a truncated, corrupted or mismatched file raises CheckpointError.
    """
    from safetensors import SafetensorError, safe_open

    path = Path(path)
    try:
        with safe_open(str(path), framework="numpy") as f:
            raw_meta = (f.metadata() or {}).get("vk_adam")
            tensors = {k: f.get_tensor(k) for k in f.keys()}
    except FileNotFoundError:
        raise CheckpointError(f"checkpoint {path} not found") from None
    except (SafetensorError, OSError, ValueError) as exc:
        raise CheckpointError(
            f"checkpoint {path} is truncated or corrupted ({exc}); keep using the previous one"
        ) from None
    if raw_meta is None:
        raise CheckpointError(f"{path} is a safetensors file but not a vk-adam checkpoint")
    meta = json.loads(raw_meta)
    if meta.get("format") != CHECKPOINT_FORMAT:
        raise CheckpointError(f"{path}: unknown checkpoint format {meta.get('format')!r}")
    if meta.get("sha256") != _digest(tensors):
        raise CheckpointError(f"{path}: checksum mismatch (corrupted); keep using the previous checkpoint")
    if meta["rule"] != optimizer.rule.name:
        raise CheckpointError(
            f"{path} was written by rule {meta['rule']!r}; this optimizer runs {optimizer.rule.name!r}"
        )
    saved_modules = [tuple(m) for m in meta["modules"]]
    current = [(m.path, m.in_features, m.out_features, m.rank) for m in adapter.modules]
    if saved_modules != current:
        missing = sorted({m[0] for m in current} - {m[0] for m in saved_modules})
        unknown = sorted({m[0] for m in saved_modules} - {m[0] for m in current})
        raise CheckpointError(
            f"{path} holds a different adapter layout (missing modules {missing[:4]}, unknown "
            f"{unknown[:4]}, or different shapes)"
        )
    params = {k[len("param/") :]: v for k, v in tensors.items() if k.startswith("param/")}
    state: dict[str, dict[str, Array]] = {}
    for k, v in tensors.items():
        if k.startswith("state/"):
            _, name, key = k.split("/", 2)
            state.setdefault(key, {})[name] = v
    slices = adapter.slices()
    if set(params) != set(slices):
        raise CheckpointError(f"{path}: parameter names differ from the adapter's")
    # Verified: apply (the optimizer's own load is itself all-or-nothing, and goes first).
    _load_state_by_name(adapter, optimizer, int(meta["step"]), state, meta["hyperparameters"])
    for key, value in params.items():
        offset, shape = slices[key]
        adapter.flat_params[offset : offset + shape[0] * shape[1]] = value.reshape(-1)
    adapter.push_params()
    if rng is not None and meta.get("rng") is not None:
        rng.bit_generator.state = meta["rng"]
    return Checkpoint(int(meta["step"]), meta.get("rng"), dict(meta.get("extra") or {}))
