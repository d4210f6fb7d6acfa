"""Storage formats: fp16/bf16 params (master copy or stochastic rounding), bf16 and 8-bit
blockwise state. The GPU is compared with the format-exact float64 reference
(``vk_adam.testing.FormatReference``), bit for bit where the math allows it."""

from __future__ import annotations

import re
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import vk_adam
from vk_adam import _formats as fmt
from vk_adam._optim.storage import group_format
from vk_adam._rules.registry import default_registry
from vk_adam.testing import FORMAT_CASES, FormatReference, RuleConformanceError, check_rule

BF16 = np.dtype(ml_dtypes.bfloat16)
DTYPES = {"float32": np.dtype(np.float32), "float16": np.dtype(np.float16), "bfloat16": BF16}


@pytest.fixture(params=["base", "subgroups"])
def variant(request, monkeypatch):
    """Run a device test under each variant of the 8-bit path ($VK_ADAM_SUBGROUPS forces it)."""
    from vk_adam._optim.variants import SUBGROUPS_ENV, subgroup_unsupported
    from vk_adam._runtime.devices import select_device

    if request.param == "subgroups" and (reason := subgroup_unsupported(select_device())):
        pytest.skip(f"the subgroup variant cannot run here: {reason}")
    monkeypatch.setenv(SUBGROUPS_ENV, "1" if request.param == "subgroups" else "0")
    return request.param


# -- the formats on the host -----------------------------------------------------------------------


def test_dynamic_maps_follow_dettmers_construction():
    signed, unsigned = fmt.dynamic_map(True), fmt.dynamic_map(False)
    for table in (signed, unsigned):
        assert table.shape == (256,) and np.all(np.diff(table.astype(np.float64)) > 0)
        assert table[-1] == 1.0 and 0.0 in table
    assert signed[0] < -0.99 and unsigned[0] == 0.0
    # decade i holds 2**i values per sign (signed) or 2**(i+1) (unsigned), in [0.1, 1] * 10**(i-6)
    positive = signed[signed > 0][:-1]
    for i in range(7):
        in_decade = (positive >= 0.1 * 10.0 ** (i - 6)) & (positive < 10.0 ** (i - 6))
        assert np.count_nonzero(in_decade) == 2**i
        assert np.count_nonzero((unsigned >= 0.1 * 10.0 ** (i - 6)) & (unsigned < 10.0 ** (i - 6))) == 2 ** (
            i + 1
        )


def test_blockwise_quantization_is_nearest_and_keeps_the_block_maximum(rng):
    x = rng.standard_normal(3 * fmt.BLOCK + 17) * np.exp(rng.standard_normal(3 * fmt.BLOCK + 17))
    for signed, values in ((True, x), (False, np.abs(x))):
        codes, absmax = fmt.quantize_blockwise(values, signed)
        back = fmt.dequantize_blockwise(codes, absmax, signed)
        table = fmt.dynamic_map(signed).astype(np.float64)
        scale = np.repeat(absmax.astype(np.float64), fmt.BLOCK)[: values.size]
        normed = values / scale
        nearest = np.abs(normed[:, None] - table[None, :]).argmin(axis=1)
        t = fmt.thresholds(fmt.dynamic_map(signed))[:255].astype(np.float64)
        close = np.min(np.abs(normed[:, None] - t[None, :]), axis=1) <= 2.0**-15 * np.abs(normed)
        assert np.all((table[codes] == table[nearest]) | close)
        block_max = np.abs(np.pad(values, (0, 4 * fmt.BLOCK - values.size))).reshape(4, -1).max(axis=1)
        np.testing.assert_allclose(absmax, block_max, rtol=1e-7)
        # the maximum of each block is stored exactly (code of 1.0, or -0.993 for a negative one)
        assert np.max(np.abs(back - values) / np.maximum(scale, 1e-30)) < 0.05


def test_nearest_rounding_matches_numpy_and_ml_dtypes(rng):
    x = (rng.standard_normal(10000) * np.exp(rng.uniform(-30, 12, 10000))).astype(np.float32)
    assert fmt.round_to(x, "float16").dtype == np.float16
    np.testing.assert_array_equal(fmt.round_to(x, "bfloat16").view(np.uint16), x.astype(BF16).view(np.uint16))


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
def test_stochastic_rounding_picks_a_neighbour_without_bias(name, rng):
    for x0 in (1.2345678e-3, -3.3333e-6, 7.77e-8, 65000.5):
        x = np.full(100_000, x0, np.float32)
        bits = rng.integers(0, 2**32, x.size, dtype=np.uint64).astype(np.uint32)
        y = fmt.round_to(x, name, bits).astype(np.float64)
        values = np.unique(y)  # the two 16-bit neighbours of x0
        assert len(values) == 2 and values[0] < float(np.float32(x0)) < values[1]
        nearest = float(x[:1].astype(DTYPES[name]).astype(np.float64)[0])
        assert nearest in values
        spread = values[1] - values[0]
        # the mean is x0 within 5 standard errors of a Bernoulli draw of the two neighbours
        assert abs(y.mean() - float(np.float32(x0))) <= 5 * spread * 0.5 / np.sqrt(x.size)


def test_the_random_stream_is_a_function_of_seed_buffer_step_and_element():
    a = fmt.random_bits(fmt.step_key(7, 0, 3), 1000)
    np.testing.assert_array_equal(a, fmt.random_bits(fmt.step_key(7, 0, 3), 1000))
    for other in (fmt.step_key(8, 0, 3), fmt.step_key(7, 1, 3), fmt.step_key(7, 0, 4)):
        assert np.mean(a == fmt.random_bits(other, 1000)) < 0.01
    assert 0.45 < np.mean(a & 1) < 0.55


def test_two_elements_share_a_hash_and_each_rounds_with_its_own_half():
    """One hash per pair of elements: the low 16 bits of an even element and of the odd one after
    it are the two halves of one hash, uniform and uncorrelated; the bits above (fp16 values
    below 2**-17 only) are each element's own."""
    key = fmt.step_key(5, 2, 9)
    bits = fmt.random_bits(key, 1 << 16)
    first = np.arange(0, 1 << 16, 2, dtype=np.uint32)  # the even elements
    pair = fmt._mix32(first * np.uint32(fmt.ELEMENT_STRIDE) + np.uint32(key))
    np.testing.assert_array_equal(bits[0::2] & 0xFFFF, pair & 0xFFFF)
    np.testing.assert_array_equal(bits[1::2] & 0xFFFF, pair >> 16)
    even, odd = (bits[0::2] & 0xFFFF).astype(np.float64), (bits[1::2] & 0xFFFF).astype(np.float64)
    assert abs(np.corrcoef(even, odd)[0, 1]) < 0.02  # 1/sqrt(32768) = 0.0055: 3.6 sigma
    for half in (even, odd):
        counts = np.bincount((half // 4096).astype(np.int64), minlength=16)  # 2,048 expected per bin
        assert np.all(np.abs(counts - 2048) < 5 * np.sqrt(2048))
    own = fmt._mix32(np.arange(1 << 16, dtype=np.uint32) * np.uint32(fmt.ELEMENT_STRIDE) + np.uint32(key))
    np.testing.assert_array_equal(bits >> 16, own & 0xFFFF)


# -- the shader against the format-exact reference ----------------------------------------------------


@pytest.mark.parametrize("name", ["adamw", "adam", "sgd"])
def test_check_rule_runs_every_builtin_rule_under_every_format(name, variant, vk_seed):
    report = check_rule(default_registry().get(name), sizes=(7,), steps=3, seed=vk_seed)
    settings = len(report.hyper)
    assert report.cases == settings * (1 + len(FORMAT_CASES))
    states = {s for _, _, s in FORMAT_CASES}
    assert states == set(fmt.STATE_DTYPES) - {"float32"} | {"float32"}
    assert {(p, sr) for p, sr, _ in FORMAT_CASES} >= {
        ("bfloat16", False),
        ("bfloat16", True),
        ("float16", True),
    }


def test_check_rule_fails_when_the_rounding_is_not_the_harness_s(monkeypatch, vk_seed):
    """The format check can fail: a reference that truncates instead of rounding to nearest even."""
    nearest = fmt.round_to

    def truncating(values, name, bits=None):
        if bits is not None or name == "float32":
            return nearest(values, name, bits)
        u = np.asarray(values, np.float32).view(np.uint32)
        if name == "bfloat16":
            return (u >> 16).astype(np.uint16).view(BF16)
        return nearest(values, name, np.zeros(u.size, np.uint32))  # stochastic with zero bits = truncation

    monkeypatch.setattr(fmt, "round_to", truncating)
    with pytest.raises(RuleConformanceError, match="param differs from the format reference"):
        check_rule(
            default_registry().get("adamw"),
            sizes=(7,),
            steps=1,
            formats=[("bfloat16", False, "float32")],
            seed=vk_seed,
        )


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
def test_the_shader_rounds_to_nearest_even_bit_for_bit(name, rng):
    """Load fp32 master values, then a step with lr=0: the shader keeps the master only where its
    own rounding equals the 16-bit param (NumPy's), so an unchanged master proves they agree."""
    special = [
        0.0,
        -0.0,
        1.0,
        65504.0,
        65519.99,
        65520.0,
        1e6,
        2.0**-24,
        2.0**-25,
        1.5 * 2.0**-25,
        3e-8,
        6e-5,
        -6.1e-5,
    ]
    special += [
        float(np.float32(1 + 2.0**-11)),
        float(np.float32(1 + 3 * 2.0**-11)),
        1 + 2.0**-8,
        1 + 3 * 2.0**-8,
    ]
    master = np.concatenate([special, rng.standard_normal(4000) * np.exp(rng.uniform(-20, 10, 4000))])
    master = master.astype(np.float32)
    if name == "bfloat16":
        master = master[np.abs(master) < 1e30]
    with np.errstate(over="ignore"):  # values beyond float16's range round to infinity
        p = master.astype(DTYPES[name])
        expected = master.astype(DTYPES[name]).view(np.uint16)
    opt = vk_adam.SGD([p], lr=0.0)
    sd = opt.state_dict()
    sd["state"] = {0: {"step": 1.0, "master_param": master.copy()}}
    opt.load_state_dict(sd)
    opt.step([np.zeros_like(p)])
    after = opt.state_dict()["state"][0]["master_param"]
    np.testing.assert_array_equal(after.view(np.uint32), master.view(np.uint32))
    np.testing.assert_array_equal(p.view(np.uint16), expected)
    opt.close()


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
def test_ties_round_to_even_in_vec4s_of_normal_values(name, rng):
    """The shader rounds a vec4 whose four values all round to normal 16-bit values by a fast
    path. Ties (halfway between two 16-bit values, either neighbour even) and the largest values
    below overflow, in such vec4s, must round as NumPy does (lr = 0, as above)."""
    ulp = 2.0**-10 if name == "float16" else 2.0**-7
    ties = [s * (1 + k * ulp / 2) * 2.0**e for s in (1, -1) for k in (1, 3, 5, 7) for e in (-10, 0, 5)]
    if name == "float16":
        ties += [65504.0, -65504.0, 65519.99, -65519.99, 65512.0, -65512.0, 65508.0, 2.0**-14]
    ties += [1.0] * (-len(ties) % 4)
    master = np.array(ties, np.float32)
    assert np.all(np.abs(master) >= 2.0**-14)  # every vec4 on the fast path
    master = np.concatenate([master, (rng.standard_normal(4096) * 8).astype(np.float32) + 16])
    p = master.astype(DTYPES[name])
    expected = p.view(np.uint16).copy()
    opt = vk_adam.SGD([p], lr=0.0)
    sd = opt.state_dict()
    sd["state"] = {0: {"step": 1.0, "master_param": master.copy()}}
    opt.load_state_dict(sd)
    opt.step([np.zeros_like(p)])
    np.testing.assert_array_equal(p.view(np.uint16), expected)
    after = opt.state_dict()["state"][0]["master_param"]
    np.testing.assert_array_equal(after.view(np.uint32), master.view(np.uint32))
    opt.close()


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
def test_stochastic_rounding_on_the_gpu_is_the_reference_stream_bit_for_bit(name, rng):
    """SGD with lr=1 makes p - g exact in float32 (both 16-bit, close exponents), so the GPU and
    the reference round the very same float32 values with the very same random bits."""
    n = 5000
    p = (rng.standard_normal(n)).astype(DTYPES[name])
    opt = vk_adam.SGD([p], lr=1.0, stochastic_rounding=True, seed=1234)
    rule = default_registry().get("sgd")
    options = dict(opt.param_groups[0])
    ref = FormatReference(rule, options, group_format((), name, "float32", True, n), seed=1234)
    ref.load(p, None)
    for step in range(1, 4):
        g = (p.astype(np.float32) * rng.uniform(-(2.0**-6), 2.0**-6, n).astype(np.float32)).astype(
            DTYPES[name]
        )
        opt.step([g])
        ref.step(g, step)
        np.testing.assert_array_equal(p.view(np.uint16), ref.param.view(np.uint16))
    opt.close()


def test_fp16_stochastic_rounding_at_the_edges_of_its_fast_path(rng):
    """The shader's fp16 rounding takes one add and one shift from 2**-14 (the smallest normal)
    up to overflow, and the general path below: values on both sides of 2**-14, subnormals,
    float16's largest and sums past it (to infinity) must match the reference stream."""
    tiny, big = 2.0**-14, 65504.0
    edges = [
        (big, -16.0), (big, -big), (-big, big), (big, 32.0), (tiny, 2.0**-24), (tiny, -(2.0**-24)),
        (-tiny, 2.0**-24), (2.0**-24, -(2.0**-24)), (3 * 2.0**-24, 2.0**-15), (1.0, -(2.0**-12)),
    ]  # fmt: skip
    n = 4096
    p = np.concatenate([[a for a, _ in edges], rng.standard_normal(n) * 2.0 ** rng.uniform(-26, 16, n)])
    g = np.concatenate([[b for _, b in edges], rng.standard_normal(n) * 2.0 ** rng.uniform(-26, 16, n)])
    with np.errstate(over="ignore"):
        p, g = np.clip(p, -big, big).astype(np.float16), np.clip(g, -big, big).astype(np.float16)
    opt = vk_adam.SGD([p], lr=1.0, stochastic_rounding=True, seed=99)
    options = dict(opt.param_groups[0])
    ref = FormatReference(
        default_registry().get("sgd"), options, group_format((), "float16", "float32", True, p.size), seed=99
    )
    ref.load(p, None)
    with np.errstate(over="ignore"):
        opt.step([g])
        ref.step(g, 1)
    np.testing.assert_array_equal(p.view(np.uint16), ref.param.view(np.uint16))
    magnitude = np.abs(p.astype(np.float32))
    assert np.isinf(magnitude).any(), "some sums must overflow to infinity"
    assert ((magnitude > 0) & (magnitude < tiny)).any() and (magnitude >= tiny).any()
    opt.close()


def test_fp16_stochastic_rounding_of_whole_vec4s_below_the_smallest_normal(rng):
    """Results just below 2**-14 (fp16 subnormals, a grid of 2**-24) in vec4s that hold nothing
    else, or normal values beside them: the shader's vec4 test must send each such vec4 to the
    exact per-value path, where the random bits pick a neighbour on the subnormal grid. SGD with
    lr = 2**-3 from subnormal params: p - lr * g is exact in float32 and off the grid."""
    n = 4096
    m = rng.integers(256, 1000, n)  # p = m * 2**-24: 2**-16 <= p < 2**-14, after two steps too
    p = (np.where(rng.random(n) < 0.5, -m, m) * 2.0**-24).astype(np.float16)
    p[2048::8] = (2.0**-14 + 2.0**-24 * rng.integers(0, 64, 256)).astype(np.float16)  # normal beside
    g = (rng.integers(-63, 64, n) * 2.0**-24).astype(np.float16)
    opt = vk_adam.SGD([p], lr=2.0**-3, stochastic_rounding=True, seed=7)
    options = dict(opt.param_groups[0])
    ref = FormatReference(
        default_registry().get("sgd"), options, group_format((), "float16", "float32", True, n), seed=7
    )
    ref.load(p, None)
    for step in (1, 2):
        before = p.astype(np.float32)
        opt.step([g])
        ref.step(g, step)
        np.testing.assert_array_equal(p.view(np.uint16), ref.param.view(np.uint16))
    exact = before - np.float32(2.0**-3) * g.astype(np.float32)
    off_grid = (exact * 2.0**24) % 1 != 0
    assert off_grid.sum() > n // 2, "most results must need rounding"
    assert (np.abs(p[:2048].astype(np.float32)) < 2.0**-14).all()
    opt.close()


def test_every_fp16_gradient_reaches_the_update_exactly():
    """SGD with lr = 1 from a zero fp32 master copy: the master after one step is 0 - g, exactly,
    for every fp16 value: +-0, every subnormal (a device may flush them when it unpacks fp16, so
    a vec4 holding one takes the bit path), every normal, +-inf."""
    bits = np.arange(0, 0x7C01, dtype=np.uint16)  # +0 .. +inf
    g = np.concatenate([bits, bits | 0x8000]).view(np.float16)
    p = np.zeros(g.size, np.float16)
    with vk_adam.SGD([p], lr=1.0) as opt:
        opt.step([g])
        master = opt.state_dict()["state"][0]["master_param"]
    want = np.float32(0.0) - g.astype(np.float32)  # 0 - (+0) is +0
    wrong = np.flatnonzero(master.view(np.uint32) != want.view(np.uint32))
    assert wrong.size == 0, (
        f"{wrong.size} of {g.size} values differ, e.g. g bits {g.view(np.uint16)[wrong[:4]]}: "
        f"master {master[wrong[:4]]} instead of {want[wrong[:4]]}"
    )


def test_params_of_kp_tensors_with_8_bit_state_and_partial_blocks(kp_manager, rng, variant):
    """Application-owned buffers of odd length: the last vec4 goes lane by lane, the last block
    is partial; the GPU matches the reference step by step."""
    import kp

    n = 4099 + 256 * 3
    host = rng.standard_normal(n).astype(np.float32)
    t = kp_manager.tensor(host.copy())
    kp_manager.sequence().eval(kp.OpTensorSyncDevice([t]))  # the application's buffer, on the device
    rule = default_registry().get("adamw")
    with vk_adam.AdamW([t], manager=kp_manager, lr=1e-2, state_dtype="int8-blockwise") as opt:
        options = dict(opt.param_groups[0])
        form = group_format(rule.variant_for(options).state, "float32", "int8-blockwise", False, n)
        ref = FormatReference(rule, options, form)
        for step in range(1, 4):
            before = opt.state_dict()["state"]
            ref.load(_device_values(kp_manager, t), before[0] if before else None)
            g = rng.standard_normal(n).astype(np.float32)
            opt.step([g])
            ref.step(g, step)
            after = opt.state_dict()["state"][0]
            got = _device_values(kp_manager, t)
            assert np.max(np.abs(got - ref.param)) <= 2e-6 * np.max(np.abs(ref.param))
            for name in ("exp_avg", "exp_avg_sq"):
                got_codes, want_codes = after[name].astype(int), ref.state[name][0].astype(int)
                # a code may differ only where float32 rounding moves the value across a threshold
                low, high = ref.bounds(name, 2e-6 * np.max(np.abs(ref.unrounded[name])))
                lo, hi = np.minimum(low, high).astype(int), np.maximum(low, high).astype(int)
                explained = (got_codes == want_codes) | ((got_codes >= lo) & (got_codes <= hi))
                assert np.count_nonzero(~explained) == 0
                np.testing.assert_allclose(after[name + ".absmax"], ref.state[name][1], rtol=1e-5)
            assert after["exp_avg"].size == n and after["exp_avg.absmax"].size == -(-n // 256)


def _device_values(manager, tensor):
    import kp

    manager.sequence().eval(kp.OpTensorSyncLocal([tensor]))
    return tensor.data().astype(np.float64).copy()


# -- state dicts, resuming, torch -----------------------------------------------------------------


@pytest.mark.parametrize(
    "param_dtype, stochastic, state_dtype", [("float32", False, "float32"), *FORMAT_CASES]
)
def test_state_dict_round_trips_bit_for_bit_and_a_resumed_run_is_identical(
    param_dtype, stochastic, state_dtype, rng
):
    n = 5000
    p0 = rng.standard_normal(n).astype(np.float32).astype(DTYPES[param_dtype])
    grads = [rng.standard_normal(n).astype(np.float32).astype(DTYPES[param_dtype]) for _ in range(6)]
    kw = {"lr": 1e-2, "state_dtype": state_dtype, "stochastic_rounding": stochastic, "seed": 99}
    straight = p0.copy()
    with vk_adam.AdamW([straight], **kw) as opt:
        for g in grads:
            opt.step([g])
    resumed = p0.copy()
    with vk_adam.AdamW([resumed], **kw) as first:
        for g in grads[:3]:
            first.step([g])
        saved = first.state_dict()
    with vk_adam.AdamW([resumed], **{**kw, "seed": 5}) as second:  # the saved seed wins
        second.load_state_dict(saved)
        again = second.state_dict()
        for key, value in saved["state"][0].items():
            a, b = np.asarray(value), np.asarray(again["state"][0][key])
            assert a.dtype == b.dtype and a.tobytes() == b.tobytes(), key
        for g in grads[3:]:
            second.step([g])
    assert resumed.tobytes() == straight.tobytes()
    if state_dtype == "int8-blockwise":
        assert saved["state"][0]["exp_avg"].dtype == np.uint8
        assert saved["state"][0]["exp_avg_sq.absmax"].shape == (-(-n // 256),)


def test_float32_export_continues_in_torch_adamw(rng):
    torch = pytest.importorskip("torch")
    n = 6000
    p = rng.standard_normal(n).astype(np.float32)
    with vk_adam.AdamW([p], lr=1e-2, weight_decay=0.1, state_dtype="int8-blockwise") as opt:
        for _ in range(3):
            opt.step([rng.standard_normal(n).astype(np.float32)])
        exported = opt.state_dict(float32=True)
    assert set(exported["state"][0]) == {"step", "exp_avg", "exp_avg_sq"}
    assert all(np.asarray(v).dtype == np.float32 for k, v in exported["state"][0].items() if k != "step")
    tp = torch.nn.Parameter(torch.tensor(p))
    topt = torch.optim.AdamW([tp], lr=1e-2, weight_decay=0.1)
    sd = {
        "state": {0: {k: torch.tensor(np.asarray(v)) for k, v in exported["state"][0].items()}},
        "param_groups": exported["param_groups"],
    }
    topt.load_state_dict(sd)
    g = rng.standard_normal(n).astype(np.float32)
    tp.grad = torch.tensor(g)
    topt.step()
    q = p.copy()
    with vk_adam.AdamW([q], lr=1e-2, weight_decay=0.1) as fp32:
        fp32.load_state_dict(exported)
        fp32.step([g])
    np.testing.assert_allclose(q, tp.detach().numpy(), rtol=0, atol=2e-6 * np.abs(p).max())


def test_eight_bit_codes_load_only_into_eight_bit_state(rng):
    p = rng.standard_normal(5000).astype(np.float32)
    with vk_adam.AdamW([p], state_dtype="int8-blockwise") as opt:
        opt.step([rng.standard_normal(5000).astype(np.float32)])
        saved = opt.state_dict()
    with vk_adam.AdamW([p.copy()], state_dtype="bfloat16") as other:
        before = other.state_dict()
        with pytest.raises(ValueError, match=r"8-bit codes.*state_dtype='int8-blockwise'"):
            other.load_state_dict(saved)
        assert other.state_dict()["state"] == before["state"]


# -- memory, options, errors, clipping -----------------------------------------------------------


def test_memory_bytes_per_param():
    n = 1 << 20
    cases = {
        ("float32", False, "float32"): 16.0,
        ("bfloat16", True, "int8-blockwise"): 6.0 + 2 * 4 / 256,
        ("bfloat16", False, "int8-blockwise"): 10.0 + 2 * 4 / 256,
        ("float32", False, "bfloat16"): 12.0,
    }
    for (param_dtype, stochastic, state_dtype), expected in cases.items():
        p = np.zeros(n, DTYPES[param_dtype])
        with vk_adam.AdamW([p], state_dtype=state_dtype, stochastic_rounding=stochastic) as opt:
            mem = opt.memory_bytes()
        resident = sum(mem[k] for k in ("param", "grad", "master", "state", "absmax"))
        assert resident / n == pytest.approx(expected, rel=1e-9), (param_dtype, state_dtype, mem)
        assert mem["total"] == resident + mem["other"]
    assert 6.0 + 8 / 256 <= 6.1


def test_small_buffers_keep_fp32_state_under_int8():
    p = np.zeros(fmt.INT8_MIN_ELEMENTS - 256, np.float32)
    with vk_adam.AdamW([p], state_dtype="int8-blockwise") as opt:
        opt.step([np.ones_like(p)])
        state = opt.state_dict()["state"][0]
        assert state["exp_avg"].dtype == np.float32 and "exp_avg.absmax" not in state
        assert opt.memory_bytes()["absmax"] == 0


def test_bad_combinations_are_refused_with_the_option_names():
    with pytest.raises(ValueError, match=r"stochastic_rounding=True.*float16/bfloat16 params"):
        vk_adam.AdamW([np.zeros(8, np.float32)], stochastic_rounding=True)
    with pytest.raises(
        ValueError, match=r"state_dtype must be one of \['float32', 'bfloat16', 'int8-blockwise'\]"
    ):
        vk_adam.AdamW([np.zeros(8, np.float32)], state_dtype="int4")
    with pytest.raises(TypeError, match="stochastic_rounding must be True or False"):
        vk_adam.AdamW([np.zeros(8, BF16)], stochastic_rounding="yes")
    with pytest.raises(TypeError, match="seed must be an integer"):
        vk_adam.AdamW([np.zeros(8, BF16)], stochastic_rounding=True, seed=-1)
    mixed = r"param 1 of group 0 is float16 but param 0 of the group is bfloat16"
    with pytest.raises(TypeError, match=mixed):
        vk_adam.AdamW([np.zeros(8, BF16), np.zeros(8, np.float16)])
    with pytest.raises(TypeError, match="C-contiguous float32, float16 or bfloat16"):
        vk_adam.AdamW([np.zeros(8, np.float64)])


def test_grads_of_another_float_dtype_are_converted_with_a_warning(rng):
    p = rng.standard_normal(64).astype(BF16)
    q = p.copy()
    g = rng.standard_normal(64).astype(np.float32)
    with vk_adam.AdamW([p]) as a, vk_adam.AdamW([q]) as b:
        with pytest.warns(UserWarning, match="converting to bfloat16"):
            a.step([g])
        b.step([g.astype(BF16)])
    assert p.tobytes() == q.tobytes()


def test_an_edit_of_a_16_bit_param_between_steps_is_taken_over_by_the_master_copy(rng):
    p = rng.standard_normal(256).astype(BF16)
    with vk_adam.SGD([p], lr=0.5) as opt:
        opt.step([np.zeros_like(p)])
        p[:10] = BF16.type(3.0)
        opt.step([np.ones(256, BF16)])
        np.testing.assert_array_equal(p[:10].astype(np.float32), np.full(10, 2.5, np.float32))
        assert np.all(opt.state_dict()["state"][0]["master_param"][:10] == 2.5)


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
def test_clipping_and_the_nonfinite_check_read_16_bit_gradients(name, rng):
    n = 3000
    p = rng.standard_normal(n).astype(DTYPES[name])
    g = (rng.standard_normal(n) * 5).astype(DTYPES[name])
    with vk_adam.AdamW([p], clip_grad_norm=1.0, skip_nonfinite=True) as opt:
        assert not opt.step([g]).skipped
        norm = float(np.linalg.norm(g.astype(np.float64)))
        assert opt.last_grad_norm() == pytest.approx(norm, rel=1e-5)
        saved = p.copy()
        g[17] = DTYPES[name].type(np.inf)
        assert opt.step([g]).skipped
        assert p.tobytes() == saved.tobytes()


@pytest.mark.parametrize("param_dtype,stochastic", [("float32", False), ("bfloat16", True)])
def test_a_skipped_step_leaves_8_bit_state_and_params_alone(param_dtype, stochastic, rng, variant):
    """The 8-bit loops test the skip flag apart from the plain loop: after an inf gradient the
    codes, the block maxima and the params are those of the step before, in both variants."""
    n = fmt.INT8_MIN_ELEMENTS + 3 * fmt.BLOCK + 5  # 8-bit state: whole blocks and a partial one
    p = rng.standard_normal(n).astype(DTYPES[param_dtype])
    options = dict(state_dtype="int8-blockwise", stochastic_rounding=stochastic, skip_nonfinite=True)
    with vk_adam.AdamW([p], lr=1e-2, **options) as opt:
        assert not opt.step([rng.standard_normal(n).astype(p.dtype)]).skipped
        saved, before = p.tobytes(), opt.state_dict()["state"][0]
        assert before["exp_avg"].dtype == np.uint8  # the state is 8-bit codes
        g = rng.standard_normal(n).astype(p.dtype)
        g[300] = np.inf
        assert opt.step([g]).skipped
        assert p.tobytes() == saved
        after = opt.state_dict()["state"][0]
        for name in ("exp_avg", "exp_avg_sq", "exp_avg.absmax", "exp_avg_sq.absmax"):
            assert np.asarray(after[name]).tobytes() == np.asarray(before[name]).tobytes(), name
        assert not opt.step([rng.standard_normal(n).astype(p.dtype)]).skipped  # and it steps again
        assert p.tobytes() != saved


def _magnitude_rule(x: np.ndarray, signed: bool) -> np.ndarray:
    """The quantizer by magnitude buckets, written apart from the table's entries: |x|'s bits
    clamped into the buckets, its bucket's code plus one at or past its threshold; in the
    signed map a negative value takes ``254 - min(code, 254)``, in the unsigned map code 0."""
    x = np.asarray(x, np.float32)
    code, threshold = fmt.bucket_codes(signed)
    a = np.abs(x) if signed else x
    bits = np.clip(a.view(np.int32).astype(np.int64), fmt.BITS_FIRST, fmt.BITS_LAST)
    bucket = (bits >> 16) - fmt.TABLE_FIRST_BUCKET
    out = code[bucket] + ((bits & 0xFFFF) >= threshold[bucket])
    if signed:
        out = np.where(x < 0, 254 - np.minimum(out, 254), out)
    return out


def test_the_harness_reads_the_table_layout_that_formats_writes():
    """The shader's table offsets are ``_formats``'s; the map values come first; and for every
    float's top 16 bits (ordered bits in the signed map) the entry, plus the bits of a value
    there, is the code of the magnitude rule: its bucket's code plus one exactly when its low 16
    bits reach the bucket's threshold (a multiple of 256 below 2**16, or none), mirrored for
    negative values. The one exception: the signed map's NaNs with the sign bit set and a
    payload below 2**16 (signalling NaNs, which no multiply returns) take -inf's code."""
    from vk_adam.shaderc import INCLUDE_DIR

    source = (Path(INCLUDE_DIR) / "vk_adam_rule.glsl").read_text()
    defines = dict(re.findall(r"#define (VK_ADAM_(?:UN)?SIGNED_ENTRIES) (.+)", source))
    assert defines["VK_ADAM_SIGNED_ENTRIES"] == f"{fmt.SIGNED_ENTRIES}u"
    assert defines["VK_ADAM_UNSIGNED_ENTRIES"] == f"({fmt.SIGNED_ENTRIES}u + {fmt.ENTRIES}u)"
    words = fmt.quant_tables()
    assert words.size == fmt.TABLE_WORDS == 2 * 256 + 2 * 2**16
    assert words[:256].view(np.float32).tobytes() == fmt.dynamic_map(True).tobytes()
    assert words[256:512].view(np.float32).tobytes() == fmt.dynamic_map(False).tobytes()
    top = np.arange(2**16, dtype=np.int64)
    for offset, signed in ((fmt.SIGNED_ENTRIES, True), (fmt.UNSIGNED_ENTRIES, False)):
        code, threshold = fmt.bucket_codes(signed)
        assert np.all((threshold == fmt.NO_THRESHOLD) | ((threshold % 256 == 0) & (threshold < 2**16)))
        assert np.all(np.diff(code) >= 0) and code.max() <= 255  # codes rise with the value
        assert np.all(code[threshold != fmt.NO_THRESHOLD] < 255)  # room for the carry
        entries = words[offset : offset + 2**16].astype(np.int64)
        for low16 in (0, 1, 255, 256, 0x7FFF, 0xFEFF, 0xFF00, 0xFFFE, 0xFFFF):
            key = (top << 16) + low16  # the bits the shader adds (ordered bits: signed map)
            got = ((entries + key) & 0xFFFFFFFF) >> 16
            bits = key ^ ((key >> 31) * 0x7FFFFFFF) if signed else key
            x = bits.astype(np.uint32).view(np.float32)
            want = _magnitude_rule(x, signed)
            signalling = signed & ((bits >> 16) == 0xFF80) & ((bits & 0xFFFF) != 0)
            np.testing.assert_array_equal(got[~signalling], want[~signalling])
            assert np.all(got[signalling] == 0)
        # every entry's code and its carry stay in the code's byte
        assert np.all((((entries + (top << 16) + 0xFFFF) & 0xFFFFFFFF) >> 16) <= 255)
    # the host's quantizer is the shader's formula: ordered bits in the signed map
    sample = np.random.default_rng(0).integers(0, 2**32, 2**16, dtype=np.uint64).astype(np.uint32)
    x = sample.view(np.float32)
    for signed in (True, False):
        signalling = signed & ((sample >> 16) == 0xFF80) & ((sample & 0xFFFF) != 0)
        np.testing.assert_array_equal(
            fmt._codes_of_normalized(x, signed)[~signalling], _magnitude_rule(x, signed)[~signalling]
        )


@pytest.mark.parametrize("signed", [True, False])
def test_the_shader_quantizes_to_the_nearest_map_value(signed, rng, variant):
    """Values on and just either side of every decision threshold of the map, tiny values and
    values near 1: the GPU's code is the emulated quantizer's, which is the nearest map value
    but within 2**-15 of a threshold. Signed: SGD's momentum buffer (= the gradient on the
    first step); unsigned: Adam's second moment (= 0.001 g**2), both with lr = 0."""
    table = fmt.dynamic_map(signed).astype(np.float64)
    thresholds = (table[:-1] + table[1:]) / 2
    targets = np.concatenate([thresholds * (1 - 4e-5), thresholds * (1 + 4e-5), thresholds, table])
    targets = np.concatenate([targets, rng.uniform(-1, 1, 2000), 10.0 ** rng.uniform(-9, 0, 2000)])
    # tiny values of either sign (float32 subnormals among them) and -0.0: the code of 0
    tiny = 10.0 ** rng.uniform(-44, -7, 200) * rng.choice([-1.0, 1.0], 200)
    targets = np.concatenate([targets, tiny, [-0.0]])
    targets = np.clip(targets if signed else np.abs(targets), -1.0, 1.0)
    blocks = -(-targets.size // 255)
    x = np.zeros((blocks, 256))
    x[:, 0] = 1.0  # every block's absmax is 1, so the normalized value is the value itself
    x.reshape(-1)[np.flatnonzero(np.arange(blocks * 256) % 256)[: targets.size]] = targets
    x = x.reshape(-1)
    if signed:
        g = x.astype(np.float32)
        with vk_adam.SGD(
            [np.zeros(x.size, np.float32)], lr=0.0, momentum=0.9, state_dtype="int8-blockwise"
        ) as opt:
            opt.step([g])
            state = opt.state_dict()["state"][0]
        codes, stored = state["momentum_buffer"], g.astype(np.float64)
    else:
        g = np.sqrt(x).astype(np.float32)
        with vk_adam.Adam([np.zeros(x.size, np.float32)], lr=0.0, state_dtype="int8-blockwise") as opt:
            opt.step([g])
            state = opt.state_dict()["state"][0]
        codes = state["exp_avg_sq"]
        v = 0.001 * g.astype(np.float64) ** 2
        stored = v / np.repeat(v.reshape(blocks, 256).max(axis=1), 256)
    # The GPU runs the table quantizer that _formats emulates: the same code everywhere, but
    # where float32 normalization (value * (1 / absmax)) moves a value across a boundary.
    emulated = fmt._codes_of_normalized(stored, signed).astype(int)
    nudged = np.maximum(
        np.abs(fmt._codes_of_normalized(stored * (1 + 1e-6), signed).astype(int) - emulated),
        np.abs(fmt._codes_of_normalized(stored * (1 - 1e-6), signed).astype(int) - emulated),
    )
    differs = codes.astype(int) != emulated
    assert not np.any(differs & (nudged == 0)), np.flatnonzero(differs & (nudged == 0))[:5]
    assert np.all(np.abs(codes.astype(int) - emulated) <= 1)
    # and that quantizer is the nearest map value, but within 2**-15 (relative) of a threshold
    nearest = np.searchsorted(thresholds, stored, side="right")
    close = np.min(np.abs(stored[:, None] - thresholds[None, :]), axis=1) <= 2.0**-15 * np.abs(stored)
    assert not np.any((emulated != nearest) & ~close)


# A rule whose nonnegative state buffer gets -0.0, negative and positive values by lane.
_SIGNS_RULE = """#version 450
#extension GL_GOOGLE_include_directive : require
#define VK_ADAM_STATE_COUNT 1
#define VK_ADAM_HYPER_COUNT 1
#include "vk_adam_rule.glsl"

void vk_adam_update(inout vec4 p, vec4 g, inout vec4 s[VK_ADAM_STATE_SLOTS]) {
    const vec4 a = abs(g);
    s[0] = vec4(uintBitsToFloat(0x80000000u), -a.y, a.z, a.w);  // -0.0, negative, positive
    p -= HYPER(0) * g;
}
"""


def test_negative_values_and_minus_zero_take_code_0_in_the_unsigned_map(tmp_path, rng, variant):
    """A nonnegative state buffer's map has no negative codes: -0.0 and negative values take
    code 0 (the value 0) on every device (a float max(x, 0.0) may keep -0.0, whose bits as an
    unsigned integer lie past every bucket), and positive values beside them the emulated
    quantizer's codes."""
    import shutil

    from vk_adam import ShaderVariant, StateBuffer, UpdateRule
    from vk_adam.shaderc import compile_shaders

    if shutil.which("glslangValidator") is None or shutil.which("spirv-val") is None:
        pytest.skip("glslangValidator and spirv-val are needed to compile the test rule's shader")
    (tmp_path / "signs.comp").write_text(_SIGNS_RULE)
    spv = next(p for p in compile_shaders(tmp_path, tmp_path / "spirv") if p.name == "signs.spv")
    rule = UpdateRule(
        name="signs",
        defaults={"lr": 1e-3},
        variants={"main": ShaderVariant(spv, (StateBuffer("s", nonnegative=True),), hyper_count=1)},
        select_variant=lambda h: "main",
        push_constants=lambda h, step: (h["lr"],),
        reference=lambda param, grad, state, h, step: None,
    )
    n = 8192  # 8-bit state from 4,096 elements
    g = (rng.uniform(0.1, 1.0, n) * rng.choice([-1.0, 1.0], n)).astype(np.float32)
    with vk_adam.Optimizer([np.zeros(n, np.float32)], rule, state_dtype="int8-blockwise") as opt:
        opt.step([g])
        state = opt.state_dict()["state"][0]
    codes, absmax = np.asarray(state["s"]), np.asarray(state["s.absmax"])
    lane = np.arange(n) % 4
    assert np.all(codes[lane < 2] == 0), np.flatnonzero(codes[lane < 2])[:5]
    # a block's absmax counts the negative values' magnitudes too
    np.testing.assert_array_equal(
        absmax, np.where(lane == 0, 0, np.abs(g)).reshape(-1, fmt.BLOCK).max(axis=1)
    )
    values = np.where(lane < 2, 0.0, np.abs(g)).astype(np.float64)
    expected = fmt.codes_for(values, absmax, signed=False)
    assert np.all(np.abs(codes[lane >= 2].astype(int) - expected[lane >= 2].astype(int)) <= 1)
    assert np.all(codes[lane >= 2] > 0)


def test_a_rule_can_keep_a_state_buffer_fp32(rng, vk_seed):
    """StateBuffer(keep_fp32=True) stays fp32 under any state_dtype; check_rule still passes."""
    import dataclasses

    adamw = default_registry().get("adamw")
    variants = {
        key: dataclasses.replace(
            v,
            state=tuple(
                dataclasses.replace(s, keep_fp32=True) if s.name == "exp_avg_sq" else s for s in v.state
            ),
        )
        for key, v in adamw.variants.items()
    }
    rule = dataclasses.replace(adamw, name="adamw_fp32_v", variants=variants)
    p = rng.standard_normal(5000).astype(np.float32)
    with vk_adam.Optimizer([p], rule, state_dtype="int8-blockwise") as opt:
        opt.step([rng.standard_normal(5000).astype(np.float32)])
        state = opt.state_dict()["state"][0]
    assert state["exp_avg"].dtype == np.uint8 and state["exp_avg_sq"].dtype == np.float32
    assert "exp_avg_sq.absmax" not in state
    check_rule(
        rule,
        sizes=(7,),
        steps=2,
        formats=[("float32", False, "int8-blockwise"), ("bfloat16", True, "bfloat16")],
        seed=vk_seed,
    )


@pytest.mark.parametrize("param_dtype, stochastic, state_dtype", FORMAT_CASES)
def test_fifty_free_running_steps_stay_on_the_format_reference(
    param_dtype, stochastic, state_dtype, rng, variant
):
    """No re-synchronisation: the GPU and FormatReference each run 50 AdamW steps on their own.
    A rare float32 rounding across a boundary (an 8-bit code, a 16-bit ulp) then propagates, so
    the bounds are looser than the one-step checks': measured over 20 seeds, fp32 params within
    4.0e-4 (int8 state) and 1.3e-4 (bf16 state) of the float64 reference's scale; 16-bit params
    equal bit for bit but for up to 5.1% (fp16) and 2.6% (bf16) of the values, within 1.4e-3 and
    4.2e-3 of the scale (one or two units in the last place). Bounds: about 5x those."""
    n = 4096 + 512
    dtype = DTYPES[param_dtype]
    p = rng.standard_normal(n).astype(np.float32).astype(dtype)
    rule = default_registry().get("adamw")
    with vk_adam.AdamW([p], lr=1e-2, state_dtype=state_dtype, stochastic_rounding=stochastic, seed=7) as opt:
        options = dict(opt.param_groups[0])
        form = group_format(rule.variant_for(options).state, param_dtype, state_dtype, stochastic, n)
        ref = FormatReference(rule, options, form, seed=7)
        ref.load(p, None)
        for step in range(1, 51):
            g = (rng.standard_normal(n) * 0.1).astype(np.float32).astype(dtype)
            opt.step([g])
            ref.step(g, step)
    want = np.asarray(ref.param, np.float64)
    err = np.max(np.abs(p.astype(np.float64) - want)) / np.max(np.abs(want))
    if param_dtype == "float32":
        assert err <= 2e-3
    else:
        differs = np.mean(p.view(np.uint16) != np.asarray(ref.param).view(np.uint16))
        bound = 7e-3 if param_dtype == "float16" else 2e-2
        assert differs <= 0.25 and err <= bound, (differs, err)


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
def test_every_finite_16_bit_param_is_unpacked_exactly(name):
    """Adam with lr = 0 leaves every param as it is, so the shader's unpacking (fp16 by its bits,
    subnormals by exact fp32 arithmetic; shifts for bf16) and the stochastic rounding
    back must reproduce all finite 16-bit patterns, subnormals and both zeros included; bf16
    subnormals as the device's fp32 arithmetic treats denormals (docs/formats.md)."""
    bits = np.arange(2**16, dtype=np.uint32).astype(np.uint16)
    values = bits.view(DTYPES[name])
    p = values[np.isfinite(values.astype(np.float32))].copy()
    before = p.view(np.uint16).copy()
    tiny = 0x400 if name == "float16" else 0x80  # subnormals and zeros: exponent bits 0
    assert np.count_nonzero((before & 0x7FFF) < tiny) == 2 * tiny
    with vk_adam.Adam([p], lr=0.0, stochastic_rounding=True, state_dtype="float32") as opt:
        opt.step([np.zeros(p.size, np.float32).astype(DTYPES[name])])
    expected = before.copy()
    if name == "bfloat16":
        # A bf16 subnormal is an fp32 denormal once unpacked, and the update's fp32 arithmetic
        # keeps or flushes denormals as the device does (NVIDIA flushes them to +-0). So they
        # must come back exactly as the same values stepped as fp32 params do on this device.
        sub = (before & 0x7F80) == 0
        wide = (before[sub].astype(np.uint32) << 16).view(np.float32)
        with vk_adam.Adam([wide], lr=0.0, state_dtype="float32") as opt:
            opt.step([np.zeros(wide.size, np.float32)])
        assert not np.any(wide.view(np.uint32) & 0xFFFF)  # an fp32 step of these stays on bf16 values
        expected[sub] = (wide.view(np.uint32) >> 16).astype(np.uint16)
    np.testing.assert_array_equal(p.view(np.uint16), expected)


@pytest.mark.parametrize("stochastic_rounding", [True, False], ids=["sr", "master"])
def test_fp16_vec4s_with_one_value_off_the_fast_path(stochastic_rounding):
    """fp16 params and gradients are converted a vec4 at a time, and rounded back with one test
    per vec4 that sends it to the exact slow paths when any lane is subnormal. Every lane
    position, next to normal values and next to zeros, must come back as it went in (Adam with
    lr = 0), and each gradient lane must reach the first moment exactly ((1 - beta1) * g in
    float32)."""
    odd = np.array([0x0001, 0x03FF, 0x8001, 0x8200], np.uint16)  # fp16 subnormals, both signs
    neighbours = [
        np.array([1.0, -2.5, 0.1, 3.0], np.float16).view(np.uint16),
        # +0 only: -0 - (+-0), the step of a zero param, is -0 or +0 by the gradient's sign
        np.zeros(4, np.float16).view(np.uint16),
    ]
    vecs = [n.copy() for n in neighbours]  # vec4s with nothing off the fast path
    for base in neighbours:
        for bits in odd:
            for lane in range(4):
                v = base.copy()
                v[lane] = bits
                vecs.append(v)
    p = np.concatenate(vecs).view(np.float16)
    g = np.concatenate(vecs[::-1]).view(np.float16)  # other vec4s' mixes as gradients
    before = p.view(np.uint16).copy()
    with vk_adam.Adam([p], lr=0.0, stochastic_rounding=stochastic_rounding, state_dtype="float32") as opt:
        opt.step([g])
        exp_avg = np.asarray(opt.state_dict()["state"][0]["exp_avg"], np.float32)
    np.testing.assert_array_equal(p.view(np.uint16), before)
    want = np.float32(1 - 0.9) * g.astype(np.float32)
    np.testing.assert_array_equal(exp_avg.view(np.uint32), want.view(np.uint32))
