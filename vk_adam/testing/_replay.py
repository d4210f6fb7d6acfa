"""The replay check of a rule that declares captured steps (``capturable_constants``): one
recorded step, evaluated again and again, is that many steps of the rule's float64 reference,
each from the GPU's last result, with the device's step count and an lr changed midway."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from .._optim import Optimizer
from .._rules import UpdateRule
from .._runtime import Runtime
from ._compare import RuleConformanceError, check_close, nonfinite_detail
from ._float32 import reference_with_floor, state_before


def check_replay(
    rule: UpdateRule,
    runtime: Runtime,
    overrides: Mapping[str, Any],
    n: int,
    steps: int,
    rtol: float,
    allowed: float,
    rng: np.random.Generator,
) -> float:
    """``steps`` evaluations of one recording over ``n`` elements (a kp tensor param, a
    gradient uploaded by the recording); returns the worst agreeing error."""
    options = {**rule.defaults, **overrides}
    where = f"(captured steps, n={n}, hyper={dict(overrides)})"
    limit = max(1, int(allowed * n)) if n > 1 else 0
    worst = 0.0
    param = runtime.buffer(rng.standard_normal(n).astype(np.float32))
    grad = runtime.buffer(np.zeros(n, np.float32))
    sequence = runtime.new_sequence()
    try:
        runtime.run([runtime.upload_op([param, grad])])
        group = {"params": [param], **overrides}
        with Optimizer([group], rule, manager=runtime.manager, capturable=True) as opt:
            runtime.record(sequence, [runtime.upload_op([grad])])
            opt.record_step(sequence, [grad])
            for step in range(1, steps + 1):
                if step == steps // 2 + 1:  # the next evaluation must read the new lr
                    options["lr"] = float(options["lr"]) * 0.5 if options["lr"] else 1e-3
                    opt.param_groups[0]["lr"] = options["lr"]
                state = state_before(rule, options, opt.state_dict(), n)
                ref = runtime.host_words([param])[0].astype(np.float64)
                start_param, start_state = ref.copy(), {k: v.copy() for k, v in state.items()}
                g = (rng.standard_normal(n) * 10.0 ** rng.uniform(-2, 1)).astype(np.float32)
                runtime.host_view(grad)[:] = g
                runtime.evaluate(sequence)
                floor = reference_with_floor(rule, ref, g, state, options, step)
                after = opt.state_dict()
                count = after["state"][0]["step"] if after["state"] else 0
                if count != step:
                    raise RuleConformanceError(
                        f"rule {rule.name!r}: after {step} evaluation(s) of one recorded captured step "
                        f"the device counts {count} steps {where}",
                        step=step,
                    )
                pairs = [("param", runtime.host_words([param])[0], ref, start_param)]
                pairs += [(k, after["state"][0][k].reshape(-1), v, start_state[k]) for k, v in state.items()]
                for what, got, want, before in pairs:
                    detail = nonfinite_detail(got, want, "reference")
                    if detail is None:
                        detail, agreeing = check_close(got, want, before, rtol, limit, floor[what])
                        worst = max(worst, agreeing)
                    if detail is not None:
                        raise RuleConformanceError(
                            f"rule {rule.name!r}: evaluation {step} of one recorded captured step: "
                            f"{what} differs from the reference's step {step} {where}: {detail}. A "
                            "captured step takes its step number and lr from vk_adam_step() and "
                            "vk_adam_lr() (vk_adam_rule.glsl), not from push constants",
                            step=step,
                        )
    finally:
        runtime.free_sequence(sequence)
        runtime.free_buffer(param)
        runtime.free_buffer(grad)
    return worst
