"""The ``vk-adam`` command: ``info``, ``rules``, ``demo`` (LoRA fine-tune), ``bench``."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from . import __version__


def _cmd_info(args: argparse.Namespace) -> int:
    from ._runtime import DEVICE_ENV, all_device_limits, kp_features, list_devices, select_device

    devices = list_devices()
    chosen = select_device(args.device)
    features = kp_features()
    print(f"vk-adam {__version__}")
    print(features.describe(verbose=args.verbose))
    if features.patched:
        print("synchronization: memory barriers around every step; one submission per step")
    else:
        print(
            "synchronization: bridge-copy fallback (stock kp); run `bash scripts/setup.sh` to "
            "build vk-adam's patched kp"
        )
    limits = {i: lim for i, lim in enumerate(all_device_limits())}
    for d in devices:
        mark = "*" if d.index == chosen.index else " "
        print(f"{mark} [{d.index}] {d.name}")
        print(f"      type: {d.device_type}   driver: {d.driver}   Vulkan API: {d.api_version}")
        print(f"      max workgroups (x): {d.max_workgroup_count}   timestamps: {d.timestamps_supported}")
        for line in _can_run(d, limits.get(d.index)):
            print(f"      {line}")
    from ._runtime import open_device, sharing

    with open_device(args.device) as handle:
        shared = sharing(handle.manager)
    print(f"sharing ({chosen.name}): {shared.describe() if shared else 'unknown (kp without patch 0017)'}")
    print(f"using [{chosen.index}] {chosen.name}  (override with --device or ${DEVICE_ENV})")
    return 0


def _mib(n: int) -> str:
    return f"{n / 2**20:,.0f} MiB" if n >= 2**20 else f"{n} bytes"


def _can_run(d: Any, lim: Any) -> list[str]:
    """The limits that matter to vk-adam on device ``d`` and what it can run there."""
    from ._optim import subgroup_unsupported

    reason = subgroup_unsupported(d)
    if reason is None:
        int8 = f"yes (subgroup variant, subgroups of {d.subgroup_size})"
    elif d.max_workgroup_size >= 256:
        int8 = f"yes (base variant: {reason})"
    else:
        int8 = f"no: the base variant needs 256 invocations per workgroup, and {reason}"
    if lim is None:
        return [f"8-bit state: {int8}", "limits: unknown (this kp build cannot read them)"]
    lines = [
        f"maxStorageBufferRange {_mib(lim.max_storage_buffer_range)} (larger buffers: one dispatch per "
        f"window), maxMemoryAllocationSize {_mib(lim.max_memory_allocation_size)} (larger NumPy "
        "groups and arrays: one buffer set per allocation), "
        f"minStorageBufferOffsetAlignment {lim.min_storage_buffer_offset_alignment}",
        f"maxPushConstantsSize {lim.max_push_constants_size} bytes, storage buffers per pipeline "
        f"{min(lim.max_per_stage_descriptor_storage_buffers, lim.max_descriptor_set_storage_buffers)}, "
        f"workgroup {d.max_workgroup_size} invocations (vk-adam runs {min(256, d.max_workgroup_size)})",
    ]
    if lim.memory_heaps:
        heaps = ", ".join(
            f"{i}: {h.size / 2**30:,.1f} GiB {'device-local' if h.device_local else 'host'}"
            for i, h in enumerate(lim.memory_heaps)
        )
        lines.append(f"memory heaps: {heaps} (staging copies live in a host-visible heap)")
    bindings = min(lim.max_per_stage_descriptor_storage_buffers, lim.max_descriptor_set_storage_buffers)
    # The harness binds 5 + 2 K buffers for K state buffers (vk_adam_rule.glsl).
    rules = ", ".join(f"{k} state: {'yes' if 5 + 2 * k <= bindings else 'no'}" for k in (0, 1, 2, 3))
    lines.append(f"rules by state buffers: {rules}")
    lines.append("fp32 / fp16 / bf16 params, bf16 state: yes; 8-bit state: " + int8)
    if lim.assumed:
        lines.append(f"assumed (the spec's guarantee; kp cannot read): {', '.join(sorted(lim.assumed))}")
    if lim.portability_subset:
        lines.append("portability subset (MoltenVK and the like): enabled")
    return lines


def _cmd_rules(args: argparse.Namespace) -> int:
    from ._rules import BLOCK_ENV, BUILTIN_PLUGIN, load_registry

    registry = load_registry(args.block or ())
    rows = []
    for name, rule in sorted(registry.rules.items()):
        hyper = ", ".join(f"{k}={v!r}" for k, v in rule.defaults.items())
        rows.append(
            {
                "rule": name,
                "distribution": rule.distribution,
                # The entry-point name: what --block and $VK_ADAM_BLOCK_PLUGINS take.
                "plugin": rule.plugin,
                "hyperparameters": hyper,
                "description": rule.description,
            }
        )
    if args.json:
        print(
            json.dumps(
                {
                    "rules": rows,
                    "failures": [f.__dict__ for f in registry.failures],
                    "conflicts": registry.conflicts,
                    "conflict_plugins": registry.conflict_plugins,
                },
                indent=2,
            )
        )
        return 0
    for row in rows:
        plugin = "built in" if row["plugin"] == BUILTIN_PLUGIN else f"plugin {row['plugin']!r}"
        print(f"{row['rule']:<10} from {row['distribution']} ({plugin})")
        if row["description"]:
            print(f"           {row['description']}")
        print(f"           {row['hyperparameters']}")
    for name, dists in registry.conflicts.items():
        plugins = registry.conflict_plugins.get(name, [])
        providers = " and ".join(
            f"{dist} (plugin {plugin!r})" for dist, plugin in zip(dists, plugins, strict=False)
        )
        print(
            f"{name:<10} CONFLICT: provided by {providers}; unusable until one is removed or blocked "
            f"(${BLOCK_ENV}=<plugin>)"
        )
    for failure in registry.failures:
        print(f"{failure.plugin:<10} FAILED ({failure.distribution}): {failure.error}")
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from ._commands import run_demo

    return run_demo(args)


def _cmd_bench(args: argparse.Namespace) -> int:
    from ._commands import run_bench

    return run_bench(args)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="vk-adam", description="Adam/AdamW/SGD and plugin update rules on Vulkan (Kompute)."
    )
    parser.add_argument("--version", action="version", version=f"vk-adam {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    info = sub.add_parser("info", help="list Vulkan devices, drivers, and the one vk-adam uses")
    info.add_argument("--device", help="device index or name substring")
    info.add_argument("--verbose", action="store_true", help="also list the kp build's patches by name")
    info.set_defaults(func=_cmd_info)

    rules = sub.add_parser("rules", help="list registered update rules and their plugins")
    rules.add_argument("--block", action="append", help="plugin (entry-point) name not to load (repeatable)")
    rules.add_argument("--json", action="store_true", help="machine-readable output")
    rules.set_defaults(func=_cmd_rules)

    from ._commands import add_demo_arguments

    demo = sub.add_parser("demo", help="fine-tune LoRA adapters of a small frozen model (main job)")
    add_demo_arguments(demo)
    demo.set_defaults(func=_cmd_demo)

    from ._commands import add_bench_arguments

    bench = sub.add_parser("bench", help="benchmark steps against NumPy and torch, side by side")
    add_bench_arguments(bench)
    bench.set_defaults(func=_cmd_bench)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # user-facing: one actionable line, not a traceback
        from ._errors import VkAdamError

        if isinstance(exc, (VkAdamError, ValueError, TypeError, FileNotFoundError)):
            print(f"vk-adam: error: {exc}", file=sys.stderr)
            return 2
        raise


if __name__ == "__main__":
    sys.exit(main())
