"""Checking what the user passes, before anything is built or written: param groups,
gradients, hyperparameters (also when changed between steps) and options; and every check of a
step, in one order (:class:`StepChecks`). Pure NumPy, no Vulkan device (a kp tensor is asked
through ``_runtime``'s functions). Every check raises TypeError (wrong kind of value) or
ValueError (right kind, wrong value) with a message that names the argument; a param the
application uploaded over an update warns (``LostUpdateWarning``). The checks of single values
(numbers, flags, step counts) are in ``values``, those of the ``params`` argument in ``params``."""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

import numpy as np

from .. import _formats as fmt
from .._errors import LostUpdateWarning, warn_at_caller
from .._inputs import convert_float_or_refuse
from .._rules import ShaderVariant, UpdateRule
from .._runtime import (
    as_manager,
    device_of,
    element_count,
    is_kp_tensor,
    refuse_unwritten,
    uploads_and_sizes,
)
from .._values import check_flag, is_index, is_kp_object, is_real, show
from .layout import ParamSlot
from .params import normalize_groups


class GroupShape(Protocol):
    """What gradient checks need to know of a param group."""

    slots: list[ParamSlot]
    host_mode: bool
    param_dtype: str


def check_options(device: Any, manager: Any, **flags: Any) -> Any:
    """The keyword options of an optimizer (or ``adam_update``) other than hyperparameters;
    returns the ``kp.Manager`` that ``manager`` means (a ``DeviceHandle``'s own)."""
    for name, value in flags.items():
        check_flag(name, value)
    if device is not None and not isinstance(device, str) and type(device) is not int:
        raise TypeError(f"device must be a device index, a name substring or None (got {show(device)})")
    manager = as_manager(manager)
    if manager is not None and not is_kp_object(manager, "Manager"):
        hint = "; pass its .manager" if is_kp_object(getattr(manager, "manager", None), "Manager") else ""
        raise TypeError(
            f"manager must be a kp.Manager, a vk_adam.DeviceHandle or None (got {show(manager)}){hint}"
        )
    return manager


def check_hyper_types(rule: UpdateRule, options: Mapping[str, Any], where: str = "") -> None:
    """Every hyperparameter is present and of its default's kind (a bool flag, a real number,
    a tuple of real numbers), so that the rule's ``validate`` and push constants see numbers;
    ``where`` (e.g. "param group 1") prefixes the message."""
    prefix = f"{where}: " if where else ""
    for key, default in rule.defaults.items():
        if key not in options:
            raise ValueError(f"{prefix}hyperparameter {key!r} is missing; rule {rule.name!r} needs it")
        value = options[key]
        if isinstance(default, (bool, np.bool_)):
            ok, expected = isinstance(value, (bool, np.bool_)), "True or False"
        elif is_real(default):
            ok, expected = is_real(value), "a real number"
        elif isinstance(default, (tuple, list)) and all(is_real(d) for d in default):
            ok = isinstance(value, (tuple, list)) and all(is_real(v) for v in value)
            expected = "a pair of real numbers" if len(default) == 2 else "a tuple of real numbers"
        else:
            continue
        if not ok:
            raise TypeError(f"{prefix}{key} must be {expected} (got {show(value)})")


def shader_spec(rule: UpdateRule, options: Mapping[str, Any], zero_grad: bool) -> tuple[float, ...]:
    """The specialization constants a group's pipeline is built with (zero-grad flag first)."""
    return (float(zero_grad), *(float(s) for s in rule.spec_constants(options)))


def same_shader(
    rule: UpdateRule,
    options: Mapping[str, Any],
    zero_grad: bool,
    variant: ShaderVariant,
    spec: tuple[float, ...],
) -> bool:
    """Whether ``options`` select the pipeline a group was built with."""
    return rule.variant_for(options) is variant and shader_spec(rule, options, zero_grad) == spec


def group_options(
    rule: UpdateRule, params: Iterable[Any], hyper: Mapping[str, Any], *, has_manager: bool
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """An optimizer's defaults (the rule's, overridden by ``hyper``) and its checked param
    groups, each with every hyperparameter filled in and validated by the rule."""
    unknown = set(hyper) - set(rule.defaults)
    if unknown:
        raise TypeError(
            f"unknown hyperparameter(s) {sorted(unknown)} for rule {rule.name!r}; "
            f"it takes {sorted(rule.defaults)}"
        )
    defaults = {**rule.defaults, **hyper}
    groups = normalize_groups(params, defaults)
    for gi, options in enumerate(groups):
        check_hyper_types(rule, options, f"param group {gi}" if len(groups) > 1 else "")
        rule.validate(options)
    if not has_manager and any(is_kp_tensor(p) for g in groups for p in g["params"]):
        raise ValueError("params include kp tensors: pass the kp.Manager that created them as manager=...")
    return defaults, groups


def check_storage(
    state_dtype: Any, stochastic_rounding: Any, seed: Any, groups: Sequence[Mapping[str, Any]]
) -> None:
    """The storage options of an optimizer, against its params' dtypes."""
    if not isinstance(state_dtype, str) or state_dtype not in fmt.STATE_DTYPES:
        raise ValueError(f"state_dtype must be one of {list(fmt.STATE_DTYPES)} (got {show(state_dtype)})")
    check_flag("stochastic_rounding", stochastic_rounding)
    if not is_index(seed) or not 0 <= int(seed) < 2**32:
        raise TypeError(f"seed must be an integer from 0 to 2**32 - 1 (got {show(seed)})")
    dtypes = {
        fmt.dtype_name(p.dtype) if isinstance(p, np.ndarray) else "float32"
        for g in groups
        for p in g["params"]
    }
    if stochastic_rounding and dtypes == {"float32"}:
        raise ValueError(
            "stochastic_rounding=True rounds each update into float16 or bfloat16 params, but "
            "every param is float32 (they take the update exactly); pass float16/bfloat16 "
            "params, or leave stochastic_rounding off"
        )


def check_recordable(groups: Sequence[GroupShape], skip_nonfinite: bool, sequence: Any) -> None:
    """``record_step`` needs a kp sequence, params on the device and no decision by the host."""
    if not is_kp_object(sequence, "Sequence"):
        raise TypeError(f"sequence must be a kp.Sequence to record the step into (got {show(sequence)})")
    if any(g.host_mode for g in groups):
        raise TypeError("record_step needs params on the device (kp tensors); NumPy params use step()")
    if skip_nonfinite:
        raise ValueError("skip_nonfinite needs the host to read the check's result: use step()")


def refuse_foreign(
    device: int | None, groups: Sequence[GroupShape], prepared: list[list[Any]] | None, sequence: Any = None
) -> None:
    """Every kp tensor gradient of this step, and the sequence ``record_step`` records into, must
    belong to the optimizer's device (``device``: its VkDevice handle; None where kp cannot
    tell): buffers of another ``kp.Manager`` are another VkDevice's, invalid in its commands."""
    if device is None:
        return
    if sequence is not None and device_of(sequence) not in (None, device):
        raise ValueError(
            "record_step: the sequence belongs to another Vulkan device (another kp.Manager) than "
            "the optimizer's; record into a sequence of the optimizer's manager (manager.sequence())"
        )
    if prepared is None:
        return
    for gi, grads in enumerate(prepared):
        for pi, g in enumerate(grads):
            # a prepared gradient is a NumPy array or a kp tensor
            if not isinstance(g, np.ndarray) and device_of(g) not in (None, device):
                where = f" of param group {gi}" if len(groups) > 1 else ""
                raise ValueError(
                    f"grad {pi}{where} is a kp tensor of another Vulkan device (another kp.Manager) "
                    "than the optimizer's; make it on the optimizer's manager"
                )


def refuse_host_grads(prepared: list[list[Any]] | None) -> None:
    """``record_step`` takes gradients that are on the device already."""
    if prepared is not None and any(isinstance(g, np.ndarray) for gs in prepared for g in gs):
        raise TypeError(
            "record_step takes gradients already on the device (kp tensors, or None for the "
            "optimizer's gradient buffer): a NumPy gradient would be uploaded when your sequence "
            "runs, after later calls may have overwritten it. Use step() for NumPy gradients"
        )


def refuse_resized(groups: Sequence[GroupShape]) -> None:
    """A NumPy param resized in place since the optimizer was made (``ndarray.resize`` with
    ``refcheck=False``) no longer fits its slot: refuse the step before anything is written."""
    for gi, group in enumerate(groups):
        if not group.host_mode:
            continue
        for pi, slot in enumerate(group.slots):
            if slot.host.shape != slot.shape:
                raise ValueError(
                    f"param {pi} of group {gi} has shape {slot.host.shape}, but the optimizer was made "
                    f"with shape {slot.shape}: it was resized in place, and its memory may have moved. "
                    "An optimizer's params keep their shape; make a new optimizer for the new shape "
                    "(state_dict() carries the state over where the shapes agree)"
                )


def prepare_grads(
    grads: Sequence[Any] | None, groups: Sequence[GroupShape], caller: str = "step()"
) -> list[list[Any]] | None:
    """Validate every gradient before anything is written; per group, per param."""
    if grads is None:
        return None
    if not isinstance(grads, (list, tuple)) and (isinstance(grads, np.ndarray) or is_kp_tensor(grads)):
        grads = [grads]
    if isinstance(grads, (str, bytes, Mapping)) or not isinstance(grads, Iterable):
        raise TypeError(
            f"grads must be a sequence of arrays or kp tensors, one per param in param order, "
            f"or None (got {show(grads)})"
        )
    grads = list(grads)
    expected = sum(len(g.slots) for g in groups)
    if len(grads) != expected:
        raise ValueError(
            f"{caller} got {len(grads)} gradient(s) for {expected} param(s); pass one per param, "
            "in the order of the params (group by group)"
        )
    out: list[list[Any]] = []
    k = 0
    for gi, group in enumerate(groups):
        prepared = []
        want = fmt.NUMPY_DTYPES[getattr(group, "param_dtype", "float32")]
        for pi, slot in enumerate(group.slots):
            g = grads[k]
            k += 1
            if type(g) is np.ndarray and g.dtype == want and g.shape == slot.shape:
                prepared.append(g)  # the common case, first: what the checks below accept as is
                continue
            name = f"param {pi} of group {gi}" if len(groups) > 1 else f"param {pi}"
            if is_kp_tensor(g):
                if group.host_mode:
                    raise TypeError(f"grad for {name} is a kp tensor but the param is a NumPy array")
                refuse_unwritten(g, f"grad for {name}")
                if element_count(g) != slot.size:
                    raise ValueError(
                        f"grad for {name} has {element_count(g)} elements; the param has {slot.size}"
                    )
                prepared.append(g)
                continue
            if g is None:
                raise TypeError(f"grad for {name} is None; expected an array")
            try:
                g = np.asarray(g)
            except (TypeError, ValueError, RuntimeError) as exc:
                raise TypeError(f"grad for {name} is not an array of numbers ({show(g)}): {exc}") from exc
            if g.shape != slot.shape and not (not group.host_mode and g.size == slot.size):
                raise ValueError(f"grad for {name} has shape {g.shape}; the param has shape {slot.shape}")
            if g.dtype != want:
                is_float = np.issubdtype(g.dtype, np.floating) or fmt.dtype_name(g.dtype) is not None
                param_dtype = getattr(group, "param_dtype", "float32")
                convert_float_or_refuse(f"grad for {name}", g.dtype, is_float, to=param_dtype)
                g = g.astype(want)
            prepared.append(g)
        out.append(prepared)
    return out


class OptionsOf(Protocol):
    """What re-validation needs to know of a param group."""

    options: dict[str, Any]
    variant: ShaderVariant
    spec: tuple[float, ...]
    validated: dict[str, Any] | None


def revalidate(rule: UpdateRule, groups: Sequence[OptionsOf], zero_grad: bool) -> None:
    """Re-check hyperparameters changed since the last step (e.g. by a schedule), before any
    GPU work, like torch's validation. Unchanged groups cost one dict comparison."""
    for gi, group in enumerate(groups):
        if _unchanged(group.options, group.validated):
            continue
        check_hyper_types(rule, group.options, f"param group {gi}")
        rule.validate(group.options)
        if not same_shader(rule, group.options, zero_grad, group.variant, group.spec):
            raise ValueError(
                "options that select the shader (e.g. amsgrad, maximize, nesterov, momentum on/off) "
                "cannot change after construction; create a new optimizer"
            )
        group.validated = dict(group.options)


def _unchanged(options: Mapping[str, Any], validated: Mapping[str, Any] | None) -> bool:
    """Whether every option is the value (and type: ``1 == True``) last validated. A value that
    cannot be compared (an array) counts as changed, and gets checked."""
    if validated is None or options.keys() != validated.keys():
        return False
    try:
        for k, v in options.items():  # a plain loop: this runs on every step
            w = validated[k]
            if v is not w and (type(v) is not type(w) or not bool(v == w)):
                return False
        return True
    except (TypeError, ValueError):
        return False


class StepGroup(GroupShape, OptionsOf, Protocol):
    """What the checks of a step need to know of a param group."""

    @property
    def step(self) -> int: ...


#: A device param's place: (group index, param index).
ParamKey = tuple[int, int]


class StepChecks:
    """The checks of every step path (``step()``, waited for or not, and ``record_step()``),
    in one order, before anything is written (:meth:`check`), and what they keep from one step
    to the next so that steps back to back pay once for what cannot change.

    ``params``: the device params (kp tensors the application owns) by place; ``device``: the
    VkDevice every buffer of a step must be on (None where kp cannot tell); ``captured``: the
    device decides whether a step is skipped (``capturable=True``)."""

    def __init__(
        self,
        rule: UpdateRule,
        groups: Sequence[StepGroup],
        params: Sequence[tuple[ParamKey, Any]],
        device: int | None,
        *,
        zeroes_grad: bool,
        skip_nonfinite: bool,
        captured: bool,
    ) -> None:
        self.rule, self._groups, self._params, self._device = rule, groups, list(params), device
        self._param_tensors = [param for _, param in self._params]
        self.zeroes_grad, self.skip_nonfinite, self._captured = zeroes_grad, skip_nonfinite, captured
        #: The application took ``grad_buffer()`` to write gradients there itself.
        self.grad_buffer_taken = False
        #: A step copied NumPy gradients into the optimizer's own gradient buffers (so a
        #: recorded step without grads reads something that was given).
        self.own_grads_given = False
        #: Each device param's evaluated uploads as of the last step that ran: the stepper adds
        #: the counts :meth:`check` returned once the step ran (a refused step notes nothing).
        self.uploads: dict[ParamKey, int] = {}
        # the params already warned about (an upload between two steps discards the update)
        self._warned: set[ParamKey] = set()
        # the device params seen written (device memory, once written, stays so)
        self._written: set[ParamKey] = set()
        # the kp tensor gradients of the last step, checked, and their prepared form
        self._grads_seen: list[weakref.ref[Any]] | None = None
        self._grads_prepared: list[list[Any]] | None = None

    def check(
        self,
        grads: Sequence[Any] | None,
        *,
        wait: bool = True,
        recording: bool = False,
        sequence: Any = None,
        known_sequence: bool = False,
        scaled: bool = False,
    ) -> tuple[list[list[Any]] | None, dict[ParamKey, int]]:
        """Every check of a step, in one order, before anything is written: the prepared
        gradients, and each device param's evaluated uploads read now (to note once the step
        ran). ``recording``: ``record_step`` into ``sequence``; ``known_sequence``: the sequence
        the last ``record_step`` recorded into (its type and device, checked then, cannot
        change); ``scaled``: a gradient scale set by the host."""
        where = "record_step()" if recording else "step()"
        check_sequence = recording and not known_sequence
        if check_sequence:
            check_recordable(self._groups, self.skip_nonfinite and not self._captured, sequence)
        self._refuse_unwritten_params()
        refuse_resized(self._groups)
        seen = self._same_grads(grads)
        # What the checks read of kp tensors, in one call: each device param's uploads, and the
        # element counts of the last step's gradients where these are the same tensors (0: one
        # was destroyed since, and they are checked again).
        uploads: list[int | None] = []
        sizes: list[int] = []
        if self._params or seen:
            uploads, sizes = uploads_and_sizes(self._param_tensors, seen or [])
        prepared = self._grads_prepared if seen is not None and all(sizes) else None
        if prepared is None:
            prepared = prepare_grads(grads, self._groups, where)
            refuse_foreign(self._device, self._groups, prepared, sequence if check_sequence else None)
        elif check_sequence:
            refuse_foreign(self._device, self._groups, None, sequence)
        counts = {key: n for (key, _), n in zip(self._params, uploads, strict=True) if n is not None}
        self._warn_lost_updates(counts)
        if recording:
            refuse_host_grads(prepared)
            if prepared is None:
                self._refuse_ungiven_grads()
        elif prepared is None:
            self._refuse_unwritten_grads(where)
        elif not self.own_grads_given:
            self.own_grads_given = any(
                isinstance(g, np.ndarray)
                for group, gs in zip(self._groups, prepared, strict=True)
                if not group.host_mode
                for g in gs
            )
        if not wait and self.skip_nonfinite:
            raise ValueError(
                "skip_nonfinite steps are synchronous (the host must learn whether the step was "
                "skipped before the next step's bias correction); use wait=True"
            )
        revalidate(self.rule, self._groups, self.zeroes_grad)
        if not wait and scaled:
            raise ValueError("a gradient scale set by the host applies to synchronous steps: use wait=True")
        self._remember_grads(grads, prepared)
        return prepared, counts

    def _same_grads(self, grads: Sequence[Any] | None) -> list[Any] | None:
        """``grads`` if it holds the very kp tensors of the last step's gradients (in order), whose
        checks then hold if each still holds its buffer (a kp tensor's kind, size and device do
        not change, nor does written memory become unwritten); else None."""
        seen = self._grads_seen
        if seen is None or not isinstance(grads, (list, tuple)) or len(grads) != len(seen):
            return None
        if any(ref() is not g for ref, g in zip(seen, grads, strict=True)):
            return None
        return list(grads)

    def _remember_grads(self, grads: Sequence[Any] | None, prepared: list[list[Any]] | None) -> None:
        """Keep gradients that are all kp tensors, checked, for :meth:`_same_grads`."""
        if prepared is self._grads_prepared and prepared is not None:
            return
        self._grads_seen, self._grads_prepared = None, None
        if prepared is None or not isinstance(grads, (list, tuple)):
            return
        if any(isinstance(g, np.ndarray) for gs in prepared for g in gs):
            return  # NumPy gradients: checked every step (their values and shapes are the caller's)
        try:
            self._grads_seen = [weakref.ref(g) for g in grads]
        except TypeError:  # a type without weak references: checked every time
            return
        self._grads_prepared = prepared

    def _refuse_unwritten_params(self) -> None:
        """Refuse a device param whose memory was never written (each is asked until it was)."""
        if len(self._written) == len(self._params):
            return
        for (gi, pi), param in self._params:
            if (gi, pi) not in self._written:
                refuse_unwritten(param, f"param {pi} of group {gi}")
                self._written.add((gi, pi))

    def _warn_lost_updates(self, counts: Mapping[ParamKey, int]) -> None:
        """Warn once per param the application uploaded from the host since the last step
        (``counts``: the uploads now): the upload copied the host's stale values over the device
        memory, and the update is lost."""
        for (gi, pi), count in counts.items():
            before = self.uploads.get((gi, pi))
            if before is None or count == before or (gi, pi) in self._warned:
                continue
            self._warned.add((gi, pi))
            where = f" of param group {gi}" if len(self._groups) > 1 else ""
            warn_at_caller(
                f"param {pi}{where} (a kp tensor) was uploaded from its host copy "
                f"(OpTensorSyncDevice) {count - before} time(s) since step {self._groups[gi].step}: "
                "each upload overwrote the device memory the optimizer updated, so that update is "
                "lost. Upload a param once, before the first step, and read it back with "
                "OpTensorSyncLocal (docs/usage.md, 'A Kompute-style training loop')",
                LostUpdateWarning,
            )

    def _refuse_ungiven_grads(self) -> None:
        """``record_step(seq)`` without grads reads the optimizer's own gradient buffers: refuse
        it when nothing was ever given to them (``grad_buffer()`` never taken, no gradients
        copied in), or each recorded step would silently apply zero gradients."""
        if self.grad_buffer_taken or self.own_grads_given:
            return
        raise ValueError(
            "record_step(sequence) without grads steps on the optimizer's own gradient buffer, but "
            "nothing was ever given to it: the recorded steps would read zeros, not your gradients. "
            "Pass the kp tensors that hold your gradients, opt.record_step(sequence, [grads]), or "
            "write the gradients into opt.grad_buffer(...) on the device (your own shaders) and "
            "record that work before the step"
        )

    def _refuse_unwritten_grads(self, where: str) -> None:
        """``step()`` without gradients on NumPy params reads a device buffer nobody wrote (zeros:
        weight decay and momentum would still move the params), unless the application took
        ``grad_buffer()`` to write it or an earlier step left its gradients (``zero_grad=False``)."""
        host = [gi for gi, g in enumerate(self._groups) if g.host_mode]
        kept = not self.zeroes_grad and self._groups[0].step > 0
        if host and not self.grad_buffer_taken and not kept:
            raise ValueError(
                f"{where} without grads on NumPy params (param group {host[0]}): pass the gradients, "
                f"{where[:-2]}(grads), or write them into opt.grad_buffer({host[0]}) on the device first"
            )
