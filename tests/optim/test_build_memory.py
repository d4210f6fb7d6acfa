"""Making an optimizer takes host memory in proportion to what it keeps: a state buffer's initial
value is quantized once per block kind and repeated (not in float64 passes over every element),
and 16-bit params are gathered in their own dtype. Billions of elements then fit the host."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

from vk_adam import _formats as fmt
from vk_adam._optim import initial_state, value_words
from vk_adam._optim.storage import quantize
from vk_adam._rules import StateBuffer

CODES = [fmt.STATE_F32, fmt.STATE_BF16, fmt.STATE_INT8_SIGNED, fmt.STATE_INT8_UNSIGNED]


def _reference(code: int, value: float, n: int) -> tuple[np.ndarray, np.ndarray | None]:
    """The state buffer made the plain way: every element's value, then the buffer's format."""
    values = np.full(n, value, np.float32)
    if code == fmt.STATE_F32:
        return value_words(values, "float32"), None
    if code == fmt.STATE_BF16:
        return value_words(values, "bfloat16"), None
    codes, absmax = quantize(values, code == fmt.STATE_INT8_SIGNED)
    return codes.view(np.uint32), absmax


@pytest.mark.parametrize("code", CODES)
@pytest.mark.parametrize("n", [0, 1, 3, 255, 256, 257, 1000, 4099])
@pytest.mark.parametrize("value", [0.0, 1.5, -0.25, 3e-8])
def test_initial_state_is_the_plain_buffer_bit_for_bit(code, n, value):
    words, absmax = initial_state(code, StateBuffer("s", initial_value=value), n)
    want_words, want_absmax = _reference(code, value, n)
    assert words.dtype == want_words.dtype
    np.testing.assert_array_equal(words, want_words)
    if want_absmax is None:
        assert absmax is None
    else:
        np.testing.assert_array_equal(absmax, want_absmax)


BUILD = textwrap.dedent(
    """
    import resource, sys
    import ml_dtypes, numpy as np
    import vk_adam
    n = int(sys.argv[1])
    rng = np.random.default_rng(0)
    params = [rng.standard_normal(n // 2, dtype=np.float32).astype(ml_dtypes.bfloat16) for _ in range(2)]
    grads = [p.copy() for p in params]
    # the arrays, the device and its shaders ready: what the optimizer adds is measured from here
    warm = vk_adam.AdamW([np.zeros(1024, ml_dtypes.bfloat16)], state_dtype="int8-blockwise",
                         stochastic_rounding=True)
    warm.step([np.ones(1024, ml_dtypes.bfloat16)])
    warm.close()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    opt = vk_adam.AdamW(params, lr=1e-3, state_dtype="int8-blockwise", stochastic_rounding=True)
    built = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    opt.step(grads)
    opt.close()
    print(1024 * (built - before))
    """
)


def test_making_a_large_bf16_int8_optimizer_takes_bytes_per_element_not_passes(vulkan_device):
    n = 1 << 24
    out = subprocess.run(
        [sys.executable, "-c", BUILD, str(n)], capture_output=True, text=True, timeout=300, check=False
    )
    assert out.returncode == 0, out.stderr[-3000:]
    grown = int(out.stdout.split()[-1])
    # What the optimizer keeps: 2 staging copies (param, grad: 4 bytes per element), and on a
    # CPU driver its device memory too (param, grad, two 8-bit states: 6). Float64 passes over the
    # initial state took about 100 bytes per element.
    assert grown / n < 20, f"making the optimizer grew the peak by {grown / n:.1f} bytes per element"
