"""Issue 9, items 7-9 and the core API's fuzz suite: malformed input is refused whole.

Every call that changes state (the optimizer constructors, ``step``, ``record_step``,
``load_state_dict`` and ``adam_update``) is fed malformed input drawn by hypothesis: wrong types,
shapes and dtypes, NaN / infinite / negative / huge / fractional numbers, bools and strings where
numbers go, wrong nesting, missing keys, None. Each call must raise TypeError or ValueError whose
message names the offending argument, and leave everything as it was, bit for bit: the NumPy
arrays passed in, the params, the optimizer state (``state_dict()``), the step counts, and the
optimizer's param and gradient buffers (their host staging copies and their device memory).

The optimizers are built once per module and reused across examples (the property itself says
that nothing changes). ``test_item_N_*`` are the regression tests of items 7, 8 and 9.
"""

from __future__ import annotations

import copy
import math
import string
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import vk_adam
from vk_adam._runtime._kp import kp_module

from ..conftest import random_grad

FUZZ = settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

# -- what "refused cleanly" means --------------------------------------------------------------

#: Words a message may use for an argument: its name, or torch's wording of the same check.
ALIASES = {
    "lr": ("lr", "learning rate"),
    "eps": ("eps", "epsilon"),
    "betas": ("betas", "beta"),
}


def names(key: str) -> tuple[str, ...]:
    return ALIASES.get(key, (key,))


def refused(call: Callable[[], Any], *words: str) -> BaseException:
    """``call`` raises TypeError or ValueError, and its message contains one of ``words``."""
    with pytest.raises((TypeError, ValueError)) as info:
        call()
    message = str(info.value).lower()
    assert any(w.lower() in message for w in words), (
        f"{type(info.value).__name__}({info.value!s}) names none of {words}"
    )
    return info.value


def download(mgr: Any, tensor: Any) -> np.ndarray:
    mgr.sequence().eval(kp_module().OpTensorSyncLocal([tensor]))
    return tensor.data().copy()


def snapshot(opt: vk_adam.Optimizer, mgr: Any, host: list[np.ndarray]) -> dict[str, Any]:
    """Everything a call could change, as bytes: ``host`` arrays, state dict, step counts (in
    ``repr``), and each buffer set's param and grad buffers (staging copy, then device memory:
    the download leaves the staging copy equal to the device's, see :func:`assert_same`)."""
    sd = opt.state_dict()
    buffers = []
    for gi, group in enumerate(opt.param_groups):
        sets = 1 if isinstance(group["params"][0], np.ndarray) else len(group["params"])
        for index in range(sets):
            for tensor in (opt.param_buffer(gi, index), opt.grad_buffer(gi, index)):
                staging = tensor.data().tobytes()
                buffers.append((staging, download(mgr, tensor).tobytes()))
    return {
        "host": [a.tobytes() for a in host],
        "groups": repr(sd["param_groups"]),
        "state": {
            i: {k: np.asarray(v).tobytes() for k, v in entry.items()} for i, entry in sd["state"].items()
        },
        "repr": repr(opt),
        "buffers": buffers,
    }


def assert_same(before: dict[str, Any], after: dict[str, Any]) -> None:
    for key in ("host", "groups", "state", "repr"):
        assert after[key] == before[key], f"{key} changed"
    # ``before`` downloaded every buffer, so its staging copy then held the device's bytes.
    for (_, device_before), (staging_after, device_after) in zip(
        before["buffers"], after["buffers"], strict=True
    ):
        assert staging_after == device_before, "a staging buffer changed"
        assert device_after == device_before, "a device buffer changed"


# -- malformed values ----------------------------------------------------------------------------

NOT_REAL = st.sampled_from(
    [None, "0.1", "", b"1", [0.1], (0.1,), {}, {"lr": 1}, 1j, True, False, np.array([0.1]), object()]
)
NON_FINITE = st.sampled_from([math.nan, math.inf, -math.inf, np.float32("nan"), np.float64("inf")])
NEGATIVE = st.floats(max_value=-1e-12, allow_nan=False) | st.integers(max_value=-1)
BAD_NONNEGATIVE = NOT_REAL | NON_FINITE | NEGATIVE
NOT_FLAG = st.sampled_from([None, "yes", "", "False", 0, 1, 1.0, [], np.array(True), np.array([True])])
BAD_BETAS = st.sampled_from(
    [None, "ab", 0.9, (0.9,), (0.9, 0.99, 0.999), (), {}, [[0.9], 0.99], (None, 0.9), (0.9, "x")]
) | st.tuples(NOT_REAL | NON_FINITE | NEGATIVE | st.floats(1.0, 1e300), st.floats(0.0, 0.99)).flatmap(
    lambda pair: st.sampled_from([pair, pair[::-1]])
)


def bad_steps(minimum: int) -> st.SearchStrategy[Any]:
    """Steps that are not integers from ``minimum`` to 2**53."""
    return st.one_of(
        st.integers(max_value=minimum - 1),
        st.integers(min_value=2**53 + 1, max_value=2**80),
        st.floats(allow_nan=True).filter(lambda f: not (f.is_integer() and minimum <= f <= 2**53)),
        st.sampled_from(
            [True, False, "3", "", None, [3], (3,), {"step": 3}, 3 + 0j, np.array([3.0]), np.bool_(True)]
        ),
        st.sampled_from([np.float32(1.5), np.float64(-2.0), np.int64(-1), np.array(math.nan)]),
    )


#: Bad values per hyperparameter of the built-in rules. ``dampening`` may be any finite number.
BAD_HYPER: dict[str, st.SearchStrategy[Any]] = {
    "lr": BAD_NONNEGATIVE,
    "eps": BAD_NONNEGATIVE,
    "weight_decay": BAD_NONNEGATIVE,
    "momentum": BAD_NONNEGATIVE,
    "dampening": NOT_REAL | NON_FINITE,
    "betas": BAD_BETAS,
    "amsgrad": NOT_FLAG,
    "maximize": NOT_FLAG,
    "nesterov": NOT_FLAG,
    "decoupled_weight_decay": NOT_FLAG,
}
CLASS_HYPER = {
    vk_adam.Adam: ["lr", "betas", "eps", "weight_decay", "amsgrad", "maximize", "decoupled_weight_decay"],
    vk_adam.AdamW: ["lr", "betas", "eps", "weight_decay", "amsgrad", "maximize"],
    vk_adam.SGD: ["lr", "momentum", "dampening", "weight_decay", "nesterov", "maximize"],
}
RULE_OF = {vk_adam.Adam: "adam", vk_adam.AdamW: "adamw", vk_adam.SGD: "sgd"}
BAD_OPTION = {
    "zero_grad": NOT_FLAG,
    "skip_nonfinite": NOT_FLAG,
    "profile": NOT_FLAG,
    "device": st.sampled_from([[], 1.5, {}, b"0", True, object(), np.array([0]), np.int64(0)]),
    "manager": st.sampled_from(["manager", 3, object(), np.zeros(3), [None]]),
}
REFUSED_GRAD_DTYPES = [np.int32, np.int64, np.uint8, np.bool_, np.complex64, np.object_, np.str_]


def bad_array(data: st.DataObject, shape: tuple[int, ...]) -> np.ndarray:
    """An array that is not a valid gradient for a param of ``shape``: a non-float dtype of
    that shape, or a float32 array of another shape."""
    if data.draw(st.booleans(), label="wrong dtype"):
        dtype = data.draw(st.sampled_from(REFUSED_GRAD_DTYPES), label="dtype")
        return np.zeros(shape, dtype)
    other = data.draw(
        st.lists(st.integers(1, 6), max_size=3).map(tuple).filter(lambda s: s != shape), label="shape"
    )
    return np.ones(other, np.float32)


# -- the optimizers under test, built once ----------------------------------------------------


class Subject:
    """An optimizer under test, its host params and the manager its buffers live on."""

    def __init__(self, opt: vk_adam.Optimizer, params: list[Any], mgr: Any) -> None:
        self.opt, self.params, self.mgr = opt, params, mgr
        self.shapes = [p.shape if isinstance(p, np.ndarray) else (int(p.size()),) for p in params]

    def snapshot(self, *extra: np.ndarray) -> dict[str, Any]:
        host = [p for p in self.params if isinstance(p, np.ndarray)]
        devices = [download(self.mgr, p) for p in self.params if not isinstance(p, np.ndarray)]
        return snapshot(self.opt, self.mgr, [*host, *devices, *extra])

    def grads(self, rng: np.random.Generator) -> list[np.ndarray]:
        return [random_grad(rng, s) for s in self.shapes]


@pytest.fixture(scope="module")
def subjects(kp_manager: Any) -> Iterator[dict[str, Subject]]:
    """Two NumPy optimizers (AdamW with amsgrad in two groups, Nesterov SGD) and one on kp
    tensors, each stepped twice so that it has state; buffers on the session's kp.Manager."""
    mgr = kp_manager
    rng = np.random.default_rng(9)
    a = [rng.standard_normal(s).astype(np.float32) for s in [(3, 4), (5,), (7,)]]
    adamw = vk_adam.AdamW(
        [{"params": a[:2]}, {"params": a[2:], "lr": 0.05}], lr=1e-2, amsgrad=True, manager=mgr
    )
    s = [rng.standard_normal(sh).astype(np.float32) for sh in [(6,), (2, 3)]]
    sgd = vk_adam.SGD(s, lr=0.1, momentum=0.9, nesterov=True, manager=mgr)
    d = [mgr.tensor(rng.standard_normal(n).astype(np.float32)) for n in (5, 9)]
    mgr.sequence().eval(kp_module().OpTensorSyncDevice(d))
    device = vk_adam.Adam(d, lr=1e-2, manager=mgr)
    out = {"adamw": Subject(adamw, a, mgr), "sgd": Subject(sgd, s, mgr), "device": Subject(device, d, mgr)}
    for subject in out.values():
        for _ in range(2):
            subject.opt.step(subject.grads(rng))
    yield out
    for subject in out.values():
        subject.opt.close()
    for t in d:
        t.destroy()


@pytest.fixture(scope="module")
def stray_tensor(kp_manager: Any) -> Iterator[Any]:
    """A kp tensor passed where it does not belong."""
    t = kp_manager.tensor(np.zeros(5, np.float32))
    yield t
    t.destroy()


# -- constructors --------------------------------------------------------------------------------


def bad_params(data: st.DataObject) -> tuple[Any, list[np.ndarray], tuple[str, ...]]:
    """A malformed ``params`` argument, the arrays inside it, and the words its error must use."""
    good = np.arange(1, 7, dtype=np.float32).reshape(2, 3)
    kind = data.draw(
        st.sampled_from(
            [
                "not a list",
                "bad item",
                "empty",
                "bad group",
                "group params",
                "group hyper",
                "repeated",
                "overlapping",
            ]
        ),
        label="params kind",
    )
    if kind == "not a list":
        value = data.draw(st.sampled_from([None, 3, 3.0, "abc", b"ab", True, {"params": [good]}, good]))
        return value, [good], ("params",)
    if kind == "bad item":
        shape = data.draw(st.lists(st.integers(1, 4), max_size=3).map(tuple), label="shape")
        item = data.draw(
            st.sampled_from(
                [
                    None,
                    3.0,
                    "p",
                    [1.0, 2.0],
                    np.zeros(shape, np.float64),
                    np.zeros(shape, np.float16),
                    np.zeros(shape, np.int32),
                    np.zeros(shape, np.bool_),
                    np.zeros((3, 4), np.float32).T,  # not contiguous
                    np.zeros((0, *shape), np.float32),
                    np.frombuffer(bytes(16), np.float32),  # read-only
                ]
            ),
            label="item",
        )
        position = data.draw(st.integers(0, 1), label="position")
        items = [good, item] if position else [item, good]
        return items, [a for a in items if isinstance(a, np.ndarray)], ("param",)
    if kind == "empty":
        return data.draw(st.sampled_from([[], (), [{"params": []}]])), [], ("param",)
    if kind == "bad group":
        value = data.draw(
            st.sampled_from([[{"params": [good]}, good], [{"lr": 0.1}], [{"params": [good]}, 3]])
        )
        return value, [good], ("param group",)
    if kind == "group params":
        value = data.draw(st.sampled_from([None, 3, "abc", {"x": good}]), label="group params")
        return [{"params": value}], [good], ("params",)
    if kind == "group hyper":
        key = data.draw(st.sampled_from(["lr", "weight_decay"]), label="key")
        value = data.draw(BAD_NONNEGATIVE, label="value")
        return [{"params": [good]}, {"params": [good.copy()], key: value}], [good], names(key)
    if kind == "repeated":
        return [good, good], [good], ("param",)
    return [good, good[1:]], [good], ("param",)  # overlapping views of one array


@FUZZ
@given(data=st.data())
def test_constructors_refuse_malformed_input(data: st.DataObject, kp_manager: Any) -> None:
    cls = data.draw(st.sampled_from(list(CLASS_HYPER)), label="class")
    front = data.draw(st.sampled_from(["class", "create", "Optimizer"]), label="front")
    param = np.linspace(-1, 1, 8, dtype=np.float32)
    params: Any = [param]
    kwargs: dict[str, Any] = {}
    inputs = [param]
    what = data.draw(st.sampled_from(["params", "hyper", "option", "unknown", "rule"]), label="what")
    if what == "params":
        params, inputs, words = bad_params(data)
    elif what == "hyper":
        key = data.draw(st.sampled_from(CLASS_HYPER[cls]), label="key")
        kwargs[key] = data.draw(BAD_HYPER[key], label="value")
        words = names(key)
    elif what == "option":
        key = data.draw(st.sampled_from(sorted(BAD_OPTION)), label="key")
        kwargs[key] = data.draw(BAD_OPTION[key], label="value")
        words = (key,)
    elif what == "unknown":
        key = data.draw(st.text(string.ascii_lowercase + "_", min_size=1, max_size=8), label="key")
        if key in CLASS_HYPER[cls] or key in BAD_OPTION:
            key += "_x"
        kwargs[key] = 0.5
        front = "create"  # the classes' own signatures refuse unknown keywords in Python itself
        words = (key,)
    else:
        rule = data.draw(st.sampled_from([None, 3, 1.5, b"adam", ["adam"], "no-such-rule"]), label="rule")
        before = [a.tobytes() for a in inputs]
        refused(lambda: vk_adam.Optimizer(params, rule), "rule")
        assert [a.tobytes() for a in inputs] == before
        return
    before = [a.tobytes() for a in inputs]
    if front == "class":
        refused(lambda: cls(params, **kwargs), *words)
    elif front == "create":
        refused(lambda: vk_adam.create(RULE_OF[cls], params, **kwargs), *words)
    else:
        refused(lambda: vk_adam.Optimizer(params, RULE_OF[cls], **kwargs), *words)
    assert [a.tobytes() for a in inputs] == before


# -- step --------------------------------------------------------------------------------------


@FUZZ
@given(data=st.data())
def test_step_refuses_malformed_input(
    data: st.DataObject, subjects: dict[str, Subject], stray_tensor: Any
) -> None:
    name = data.draw(st.sampled_from(["adamw", "sgd", "device"]), label="optimizer")
    subject = subjects[name]
    opt = subject.opt
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    grads: Any = subject.grads(rng)
    if data.draw(st.booleans(), label="non-finite values in the good grads"):
        grads[0].reshape(-1)[0] = data.draw(st.sampled_from([math.nan, math.inf, -math.inf]))
    wait: Any = data.draw(st.booleans(), label="wait")
    kind = data.draw(
        st.sampled_from(["not a list", "count", "bad grad", "wait", "hyper", "missing hyper"]), label="kind"
    )
    words: tuple[str, ...] = ("grad",)
    group: dict[str, Any] = {}
    changed: dict[str, Any] = {}  # the group's options while the step is tried
    if kind == "not a list":
        grads = data.draw(st.sampled_from([3.0, 7, "abc", b"ab", True, {0: grads[0]}, {}, object()]))
    elif kind == "count":
        grads = grads[:-1] if data.draw(st.booleans(), label="fewer") else [*grads, grads[0].copy()]
    elif kind == "bad grad":
        i = data.draw(st.integers(0, len(grads) - 1), label="index")
        host_group = isinstance(subject.params[i], np.ndarray)
        choices = ["array", "None", "ragged", "string", "nested strings"]
        choices += ["kp tensor"] if host_group else []
        bad = data.draw(st.sampled_from(choices), label="bad grad")
        if bad == "array":
            shape = subject.shapes[i]
            value = bad_array(data, shape)
            if not host_group and value.dtype == np.float32 and value.size == math.prod(shape):
                value = np.ones(value.size + 1, np.float32)  # device groups take any shape of that size
            grads[i] = value
        else:
            grads[i] = {
                "None": None,
                "ragged": [[1.0, 2.0], [3.0]],
                "string": "grad",
                "nested strings": np.full(subject.shapes[i], "x").tolist(),
                "kp tensor": stray_tensor,
            }[bad]
    elif kind == "wait":
        wait = data.draw(NOT_FLAG, label="wait value")
        words = ("wait",)
    else:
        group = opt.param_groups[data.draw(st.integers(0, len(opt.param_groups) - 1), label="group")]
        key = data.draw(st.sampled_from(sorted(k for k in BAD_HYPER if k in group)), label="key")
        changed = dict(group)
        if kind == "hyper":
            changed[key] = data.draw(BAD_HYPER[key], label="value")
        else:
            del changed[key]
        words = names(key)
    host_inputs = list(arrays_in(grads))
    before = subject.snapshot(*host_inputs)
    saved = dict(group)
    try:
        if changed:  # as a schedule would, between steps
            group.clear()
            group.update(changed)
        refused(lambda: opt.step(grads, wait=wait), *words)
    finally:
        group.clear()
        group.update(saved)
    assert_same(before, subject.snapshot(*host_inputs))


# -- record_step -------------------------------------------------------------------------------


@FUZZ
@given(data=st.data())
def test_record_step_refuses_malformed_input(
    data: st.DataObject, subjects: dict[str, Subject], stray_tensor: Any, kp_manager: Any
) -> None:
    subject = subjects["device"]
    opt = subject.opt
    seq = kp_manager.sequence()
    sequence: Any = seq
    grads: Any = None
    kind = data.draw(st.sampled_from(["sequence", "grads", "numpy optimizer"]), label="kind")
    words: tuple[str, ...] = ("grad",)
    if kind == "sequence":
        sequence = data.draw(
            st.sampled_from([None, "seq", 3, [], stray_tensor, kp_manager]), label="sequence"
        )
        words = ("sequence",)
    elif kind == "grads":
        bad = data.draw(
            st.sampled_from(["number", "string", "numpy", "count", "size", "None"]), label="bad grads"
        )
        grads = {
            "number": 3.0,
            "string": "grads",
            # NumPy gradients would be read when the sequence runs, after later calls
            "numpy": [np.ones(s, np.float32) for s in subject.shapes],
            "count": [stray_tensor],
            "size": [opt.grad_buffer(0, 1), opt.grad_buffer(0, 0)],  # 9 and 5 elements for 5 and 9
            "None": [None, None],
        }[bad]
    else:
        subject = subjects[data.draw(st.sampled_from(["adamw", "sgd"]), label="optimizer")]
        opt = subject.opt
        words = ("params", "record_step")
    inputs = list(arrays_in(grads))
    before = subject.snapshot(*inputs)
    refused(lambda: opt.record_step(sequence, grads), *words)
    # Nothing may have been recorded into the sequence: run it (with one harmless op, as an
    # empty sequence is not valid Vulkan) and see that params and state are still the same.
    seq.record(kp_module().OpTensorSyncLocal([stray_tensor]))
    seq.eval()
    seq.destroy()
    assert_same(before, subject.snapshot(*inputs))


# -- load_state_dict ---------------------------------------------------------------------------


def shifted(sd: dict[str, Any], as_type: Callable[[float], Any]) -> dict[str, Any]:
    """A valid state dict that differs from ``sd`` everywhere (state, steps, lr), so that a
    half-applied load would show; steps are written as ``as_type`` (torch writes tensors)."""
    out = copy.deepcopy(sd)
    for entry in out["state"].values():
        for k, v in entry.items():
            entry[k] = as_type(v + 3) if k == "step" else v * 2 + 1
    for group in out["param_groups"]:
        group["lr"] *= 0.5
    return out


STEP_TYPES = [float, int, np.float32, np.int64, lambda v: np.array(v, np.float32)]


def test_the_fuzzed_state_dicts_are_valid_until_corrupted(subjects: dict[str, Subject]) -> None:
    """The base of every corruption below loads, and changes everything a half-applied load
    could change; loading the original back restores the optimizer bit for bit."""
    for name in ("adamw", "sgd"):
        subject = subjects[name]
        sd = subject.opt.state_dict()
        before = subject.snapshot()
        for as_type in STEP_TYPES:
            subject.opt.load_state_dict(shifted(sd, as_type))
            loaded = subject.opt.state_dict()
            assert all(e["step"] == sd["state"][i]["step"] + 3 for i, e in loaded["state"].items())
            assert subject.snapshot()["state"] != before["state"]
        subject.opt.load_state_dict(sd)
        assert_same(before, subject.snapshot())


def corrupt_state_dict(data: st.DataObject, sd: dict[str, Any], state_names: list[str]) -> tuple[str, ...]:
    """Corrupt ``sd`` in place at one drawn spot; return the words its error must use."""
    groups, state = sd["param_groups"], sd["state"]
    gi = data.draw(st.integers(0, len(groups) - 1), label="group")
    group = groups[gi]
    pid = data.draw(st.sampled_from(group["params"]), label="param id")
    entry = state[pid]
    kind = data.draw(
        st.sampled_from(
            [
                "top",
                "state",
                "param_groups",
                "group count",
                "group",
                "no params",
                "group params",
                "hyper",
                "shader option",
                "entry",
                "step",
                "uneven steps",
                "buffer",
                "no buffer",
            ]
        ),
        label="kind",
    )
    if kind == "top":
        replacement = data.draw(st.sampled_from([None, [], "sd", 3, {}, {"state": {}}, {"param_groups": []}]))
        sd.clear()
        sd["replacement"] = replacement
        return ("state",)
    if kind == "state":
        sd["state"] = data.draw(st.sampled_from([[1], None, "x", 5, [(0, {})]]), label="state")
        return ("state",)
    if kind == "param_groups":
        sd["param_groups"] = data.draw(st.sampled_from([None, {}, "x", 5, group]), label="param_groups")
        return ("param_groups",)
    if kind == "group count":
        sd["param_groups"] = groups[:-1] if data.draw(st.booleans()) else [*groups, group]
        return ("param group",)
    if kind == "group":
        groups[gi] = data.draw(st.sampled_from([5, None, "x", [0], group["params"]]), label="group value")
        return ("param group",)
    if kind == "no params":
        del group["params"]
        return ("params",)
    if kind == "group params":
        ids = group["params"]
        group["params"] = data.draw(
            st.sampled_from(
                [None, 5, "x", [0.5], [True], [[0]], ["0"], [*ids, 99], ids[:-1], [ids[0], *ids]]
            ),
            label="ids",
        )
        return ("params", "param id")
    if kind == "hyper":
        key = data.draw(st.sampled_from(sorted(k for k in BAD_HYPER if k in group)), label="key")
        group[key] = data.draw(BAD_HYPER[key], label="value")
        return names(key)
    if kind == "shader option":
        key = data.draw(st.sampled_from([k for k in ("amsgrad", "nesterov", "maximize") if k in group]))
        group[key] = not group[key]
        return ("param group",)
    if kind == "entry":
        state[pid] = data.draw(st.sampled_from([5, None, "x", [1, 2], 1.5, np.zeros(3)]), label="entry")
        return (f"param {pid}",)
    if kind == "step":
        entry["step"] = data.draw(bad_steps(0), label="step")
        return (f"'step' of param {pid}",)
    if kind == "uneven steps" and len(group["params"]) > 1:
        entry["step"] = entry["step"] + data.draw(st.integers(1, 1000), label="extra steps")
        return ("step",)
    name = data.draw(st.sampled_from(state_names), label="buffer")
    if kind == "no buffer":
        del entry[name]
        return (name,)
    size = np.asarray(entry[name]).size
    entry[name] = data.draw(
        st.sampled_from(
            [
                "x",
                None,
                {},
                [[1.0], [2.0, 3.0]],
                np.zeros(size + 1, np.float32),
                np.zeros(max(size - 1, 0), np.float32),
                np.full(size, "x"),
                np.zeros(size, np.complex64),
                np.zeros(size, np.bool_),
                np.zeros(size, object),
            ]
        ),
        label="buffer value",
    )
    return (name,)


@FUZZ
@given(data=st.data())
def test_load_state_dict_refuses_malformed_input(data: st.DataObject, subjects: dict[str, Subject]) -> None:
    subject = subjects[data.draw(st.sampled_from(["adamw", "sgd", "device"]), label="optimizer")]
    opt = subject.opt
    as_type = data.draw(st.sampled_from(STEP_TYPES), label="step type")
    sd = shifted(opt.state_dict(), as_type)
    state_names = sorted(k for k in sd["state"][0] if k != "step")
    words = corrupt_state_dict(data, sd, state_names)
    loaded: Any = sd.get("replacement", sd)
    inputs = list(arrays_in(loaded))  # the caller's arrays stay as they were too
    before = subject.snapshot(*inputs)
    refused(lambda: opt.load_state_dict(loaded), *words)
    assert_same(before, subject.snapshot(*inputs))


def arrays_in(value: Any) -> Iterator[np.ndarray]:
    """Every NumPy array inside nested dicts, lists and tuples."""
    if isinstance(value, np.ndarray):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from arrays_in(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from arrays_in(v)


# -- adam_update -------------------------------------------------------------------------------


@FUZZ
@given(data=st.data())
def test_adam_update_refuses_malformed_input(data: st.DataObject, stray_tensor: Any) -> None:
    n = data.draw(st.integers(1, 8), label="n")
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    names_ = ["param", "grad", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"]
    buffers: list[Any] = [rng.standard_normal(n).astype(np.float32) for _ in names_]
    buffers[3] = np.abs(buffers[3])
    step: Any = data.draw(st.integers(1, 100), label="step")
    config: Any = {"amsgrad": True} if data.draw(st.booleans(), label="amsgrad") else None
    options: dict[str, Any] = {}
    kind = data.draw(
        st.sampled_from(["step", "config", "config key", "hyper", "buffer", "alias", "option", "no max"]),
        label="kind",
    )
    if kind == "step":
        step = data.draw(bad_steps(1), label="bad step")
        words: tuple[str, ...] = ("step",)
    elif kind == "config":
        config = data.draw(st.sampled_from([3, "lr=0.1", [("lr", 0.1)], True, 0.1]), label="config")
        words = ("config",)
    elif kind == "config key":
        key = data.draw(st.sampled_from(["momentum", "nesterov", "step", "LR", ""]), label="key")
        config = {key: 0.1}
        words = (f"'{key}'",)
    elif kind == "hyper":
        key = data.draw(st.sampled_from(CLASS_HYPER[vk_adam.Adam]), label="key")
        config = {key: data.draw(BAD_HYPER[key], label="value")}
        words = names(key)
    elif kind in ("buffer", "alias"):
        i = data.draw(st.integers(0, 4 if config else 3), label="buffer")
        if kind == "alias":
            j = data.draw(st.integers(0, 4 if config else 3).filter(lambda j: j != i), label="aliased by")
            buffers[j] = buffers[i] if data.draw(st.booleans(), label="same") else buffers[i][:]
        else:
            buffers[i] = data.draw(
                st.sampled_from(
                    [
                        None,
                        [0.0] * n,
                        buffers[i].astype(np.float64),
                        buffers[i].astype(np.int32),
                        np.zeros((2, n), np.float32).T,  # not contiguous (or the wrong size)
                        np.frombuffer(buffers[i].tobytes(), np.float32),
                        np.zeros(n + 1, np.float32),
                        stray_tensor,
                    ]
                ),
                label="bad buffer",
            )
        words = (names_[i], "buffer")
    elif kind == "option":
        key = data.draw(st.sampled_from(["zero_grad", "device", "manager"]), label="option")
        options[key] = data.draw(NOT_FLAG if key == "zero_grad" else BAD_OPTION[key], label="value")
        words = (key,)
    else:
        config = {"amsgrad": True}
        buffers[4] = None
        words = ("max_exp_avg_sq",)
    arrays = [b for b in buffers if isinstance(b, np.ndarray)]
    before = [a.tobytes() for a in arrays]
    p, g, m, v, vmax = buffers
    refused(lambda: vk_adam.adam_update(p, g, m, v, step, config, max_exp_avg_sq=vmax, **options), *words)
    assert [a.tobytes() for a in arrays] == before


# -- a closed optimizer ------------------------------------------------------------------------


def test_a_closed_optimizer_refuses_every_call_and_changes_nothing(rng: np.random.Generator) -> None:
    p = rng.standard_normal(6).astype(np.float32)
    opt = vk_adam.Adam([p])
    opt.step([random_grad(rng, (6,))])
    sd = opt.state_dict()
    opt.close()
    before = p.tobytes()
    for call in (
        lambda: opt.step([random_grad(rng, (6,))]),
        lambda: opt.step(),
        lambda: opt.load_state_dict(sd),
        lambda: opt.record_step(None),
        lambda: opt.zero_grad(),
        lambda: opt.state_dict(),
    ):
        with pytest.raises(vk_adam.OptimizerClosedError):
            call()
    assert p.tobytes() == before


# -- regression tests of items 7, 8 and 9 ------------------------------------------------------


@pytest.mark.parametrize("step", [-1, -5, 1.5, math.inf, math.nan, True, "3", None, 2.0**60])
def test_item_7_load_state_dict_refuses_a_bad_step(subjects: dict[str, Subject], step: Any) -> None:
    subject = subjects["adamw"]
    sd = subject.opt.state_dict()
    sd["state"][1]["step"] = step
    before = subject.snapshot()
    error = refused(lambda: subject.opt.load_state_dict(sd), "'step' of param 1")
    assert isinstance(error, TypeError if isinstance(step, (bool, str, type(None))) else ValueError)
    assert_same(before, subject.snapshot())


@pytest.mark.parametrize(
    "step", [3.0, 3, np.int64(3), np.float32(3.0), np.array(3.0, np.float32), np.array(3)]
)
def test_item_7_load_state_dict_takes_steps_as_torch_and_numpy_write_them(
    subjects: dict[str, Subject], step: Any
) -> None:
    opt = subjects["sgd"].opt
    sd = opt.state_dict()
    loaded = copy.deepcopy(sd)
    for entry in loaded["state"].values():
        entry["step"] = step
    opt.load_state_dict(loaded)
    assert [e["step"] for e in opt.state_dict()["state"].values()] == [3.0, 3.0]
    opt.load_state_dict(sd)


@pytest.mark.parametrize(
    ("corrupt", "words"),
    [
        (lambda sd: sd.update(state=[1]), "state_dict['state']"),
        (lambda sd: sd["state"].update({0: 5}), "state of param 0"),
        (lambda sd: sd["param_groups"][0].pop("params"), "param group 0"),
        (lambda sd: sd.update(param_groups={"params": [0, 1]}), "param_groups"),
        (lambda sd: sd["param_groups"][1].update(params=None), "'params' of param group 1"),
        (lambda sd: sd["param_groups"].__setitem__(0, 7), "param group 0"),
    ],
    ids=[
        "state a list",
        "state entry an int",
        "group without params",
        "groups a dict",
        "params None",
        "group an int",
    ],
)
def test_item_7_load_state_dict_refuses_bad_structure_without_attribute_or_key_errors(
    subjects: dict[str, Subject], corrupt: Callable[[dict[str, Any]], Any], words: str
) -> None:
    subject = subjects["adamw"]
    sd = shifted(subject.opt.state_dict(), float)
    corrupt(sd)
    before = subject.snapshot()
    refused(lambda: subject.opt.load_state_dict(sd), words)
    assert_same(before, subject.snapshot())


@pytest.mark.parametrize("step", [math.inf, math.nan, -math.inf, True, "3", None, 0, 2.5, 2**64])
def test_item_8_adam_update_refuses_a_bad_step(step: Any) -> None:
    buffers = [np.full(4, x, np.float32) for x in (1.0, 0.5, 0.0, 0.0)]
    before = [b.tobytes() for b in buffers]
    refused(lambda: vk_adam.adam_update(*buffers, step), "step")
    assert [b.tobytes() for b in buffers] == before


def test_item_9_messages_name_the_argument(subjects: dict[str, Subject]) -> None:
    p = np.ones(4, np.float32)
    assert isinstance(refused(lambda: vk_adam.Adam([p], lr=None), "lr must be a real number"), TypeError)
    refused(lambda: vk_adam.SGD([p], momentum="0.9"), "momentum must be a real number")
    refused(lambda: vk_adam.Adam([p], betas=None), "betas must be a pair of real numbers")
    refused(lambda: vk_adam.Adam([p], amsgrad="yes"), "amsgrad must be True or False")
    refused(lambda: vk_adam.Adam(None), "params must be")
    refused(lambda: vk_adam.Optimizer([p], None), "rule must be")
    refused(lambda: vk_adam.adam_update(p, p.copy(), p.copy(), p.copy(), 1, {"eps": None}), "eps must be")
    subject = subjects["adamw"]
    before = subject.snapshot()
    refused(lambda: subject.opt.step(3.0), "grads must be a sequence of arrays")
    sd = subject.opt.state_dict()
    sd["state"][0]["exp_avg"] = "x"
    refused(lambda: subject.opt.load_state_dict(sd), "state 'exp_avg' of param 0")
    lr = subject.opt.param_groups[1]["lr"]
    subject.opt.param_groups[1]["lr"] = None
    try:
        refused(lambda: subject.opt.step(subject.grads(np.random.default_rng(0))), "param group 1: lr")
    finally:
        subject.opt.param_groups[1]["lr"] = lr
    assert_same(before, subject.snapshot())
    # torch's messages are kept where torch has one
    refused(lambda: vk_adam.Adam([p], lr=-1.0), "Invalid learning rate: -1.0")


def test_a_rule_whose_push_constants_fail_changes_nothing(rng):
    """A plugin's push_constants() that raises at some step raises before any staging memory,
    buffer or step count changes (they are packed before the step's inputs are staged)."""
    import dataclasses

    from vk_adam._rules.builtin import ADAMW

    def pack(hyper, step):
        if step == 2:
            raise RuntimeError("the plugin's packing failed")
        return ADAMW.push_constants(hyper, step)

    rule = dataclasses.replace(ADAMW, name="adamw-flaky", push_constants=pack)
    params = [rng.standard_normal((7, 9)).astype(np.float32), rng.standard_normal(130).astype(np.float32)]
    with vk_adam.Optimizer(params, rule) as opt:
        opt.step([random_grad(rng, p.shape) for p in params])
        before = [p.copy() for p in params]
        staging = opt.grad_buffer().data().copy()
        state = opt.state_dict()
        with pytest.raises(RuntimeError, match="packing failed"):
            opt.step([random_grad(rng, p.shape) for p in params])
        for p, b in zip(params, before, strict=True):
            np.testing.assert_array_equal(p, b)
        np.testing.assert_array_equal(opt.grad_buffer().data(), staging)
        after = opt.state_dict()
        assert after["state"][0]["step"] == state["state"][0]["step"] == 1.0
        np.testing.assert_array_equal(after["state"][1]["exp_avg"], state["state"][1]["exp_avg"])
