"""The bench's workload: the cases (tensor sizes each step updates), their selection, and the
``vk-adam bench`` arguments."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass

from .host import add_host_arguments
from .zero import add_zero_arguments

#: AdamW without AMSGrad, gradient not zeroed: read p, g, m, v; write p, m, v (as torch's).
BYTES_PER_ELEMENT = 28


@dataclass(frozen=True)
class Case:
    name: str
    group: str  # "single", "lora", "tiny"
    sizes: tuple[int, ...]  # element count of each tensor
    description: str

    @property
    def elements(self) -> int:
        return sum(self.sizes)


def _lora_sizes(layers: int, rank: int, modules: Sequence[tuple[int, int]]) -> tuple[int, ...]:
    sizes = []
    for _ in range(layers):
        for fin, fout in modules:
            sizes += [rank * fin, fout * rank]  # A [r, in], B [out, r]
    return tuple(sizes)


def all_cases() -> list[Case]:
    cases = [
        Case(f"single-2^{k}", "single", (2**k,), f"one tensor of 2^{k} elements")
        for k in (20, 22, 24, 26, 28)
    ]
    h = 4096  # Llama-2-7B
    cases.append(
        Case("lora-qv-r8-32l", "lora", _lora_sizes(32, 8, [(h, h)] * 2), "LoRA q,v r8, 32 layers (7B dims)")
    )
    cases.append(
        Case(
            "lora-qkvo-r16-32l", "lora", _lora_sizes(32, 16, [(h, h)] * 4), "LoRA q,k,v,o r16, 32 layers (7B)"
        )
    )
    big, kv, mlp = 8192, 1024, 28672  # Llama-2-70B: GQA k/v, SwiGLU MLP
    modules = [(big, big), (big, kv), (big, kv), (big, big), (big, mlp), (big, mlp), (mlp, big)]
    cases.append(
        Case("lora-all-r64-80l", "lora", _lora_sizes(80, 64, modules), "LoRA all linear r64, 80 layers (70B)")
    )
    cases.append(Case("tiny-1k", "tiny", (1024,), "one tensor of 1,024 elements (host overhead)"))
    return cases


def add_bench_arguments(parser: argparse.ArgumentParser) -> None:
    names = ", ".join(c.name for c in all_cases())
    parser.add_argument(
        "--cases",
        default="auto",
        help="comma-separated case names or groups (single, lora, tiny, all; train: whole training "
        "steps of the demo model, formats: 16-bit params and compressed state, zero: ZeRO-1 "
        "on --ranks processes, and host: AdamW on NumPy params at --host-sizes beside torch CPU "
        "and torch CUDA with copies in and out, arrays reused and fresh each step; each a table "
        "of its own); 'auto' = all optimizer cases on a "
        f"GPU, the smaller ones on a software device. Cases: {names}",
    )
    parser.add_argument("--device", help="Vulkan device index or name substring")
    parser.add_argument("--repeats", type=int, default=20, help="timed runs per figure (default %(default)s)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed runs first (default %(default)s)")
    parser.add_argument(
        "--cpu-max-elements",
        type=int,
        default=2**24,
        help="skip CPU peers (NumPy, torch CPU) above this many elements (default %(default)s)",
    )
    parser.add_argument(
        "--steps-per-batch",
        type=int,
        default=None,
        help="steps issued back to back per measurement (default: 100 on a GPU, 10 on a CPU device)",
    )
    parser.add_argument("--out", default="vk-adam-bench", help="output folder (default %(default)s)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.add_argument(
        "--render",
        metavar="BENCH_JSON",
        help="only re-render a saved bench.json (or formats.json) into --out",
    )
    add_zero_arguments(parser)
    add_host_arguments(parser)


def select_cases(spec: str, software: bool) -> list[Case]:
    cases = all_cases()
    if spec == "auto":
        if software:  # a CPU driver is slow: keep the run to a minute or two
            return [c for c in cases if c.elements <= 2**24 and c.name != "single-2^24"]
        return cases
    wanted = {w.strip() for w in spec.split(",") if w.strip()}
    if "all" in wanted:
        return cases
    chosen = [c for c in cases if c.name in wanted or c.group in wanted]
    unknown = wanted - {c.name for c in cases} - {c.group for c in cases}
    if unknown or not chosen:
        raise ValueError(f"unknown bench case(s) {sorted(unknown)}; known: {[c.name for c in cases]}")
    return chosen
