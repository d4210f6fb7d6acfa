"""Learning-rate schedules for vk-adam optimizers, with torch.optim.lr_scheduler's protocol.

A scheduler sets each param group's ``lr`` to ``initial_lr * factor(step)``: when it is built
(step 0, as in torch), then at every :meth:`LRScheduler.step`. Changing an lr between steps
costs nothing (it is a push constant), and ``record_step`` reads it when it records, so steps
recorded with ``scheduler.step()`` between them each carry their own lr::

    opt = vk_adam.AdamW(params, lr=3e-4)
    sched = vk_adam.schedules.CosineDecay(opt, warmup_steps=100, total_steps=1000)
    for batch in batches:
        opt.step(grads(batch))
        sched.step()

:class:`Constant`, :class:`LinearDecay`, :class:`CosineDecay` and :class:`CosineWithHardRestarts`
compute the formula of a ``transformers`` schedule function (each class names its own) in the
same floating-point order, so their lrs are bit-identical; they hold past ``total_steps`` too,
as there. :class:`LinearWarmup` is torch's ``LinearLR`` up to the initial lr, and
:class:`LambdaLR` torch's ``LambdaLR``.

:meth:`LRScheduler.state_dict` is plain JSON-able data (a LambdaLR's function is not saved, as in
torch); :func:`vk_adam.lora.save_checkpoint` stores it with ``scheduler=``. Bad arguments and
state dicts raise TypeError / ValueError naming the argument, and change nothing.
"""

from __future__ import annotations

from .._values import MAX_STEP as MAX_STEP
from ._formulas import Constant, CosineDecay, CosineWithHardRestarts, LambdaLR, LinearDecay, LinearWarmup
from ._scheduler import LRScheduler

# fmt: off
__all__ = ["Constant", "CosineDecay", "CosineWithHardRestarts", "LRScheduler", "LambdaLR",
           "LinearDecay", "LinearWarmup"]
# fmt: on
