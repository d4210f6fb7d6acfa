"""The work behind the ``vk-adam`` command's longer subcommands: ``bench`` and ``demo``
(``vk_adam.cli`` parses the arguments and dispatches). This file is the package's face: each
function imports its subcommand when called, so ``vk-adam info`` loads neither.

Both need matplotlib and tqdm, which the library does not: they come with the ``demo`` extra
(``pip install 'vk-adam[demo]'``), and each command says so before it starts when they are
missing."""

from __future__ import annotations

import argparse
import importlib
import sys

#: What the demo and the bench import beyond the library: the ``demo`` extra.
DEMO_EXTRA = ("matplotlib", "tqdm")
INSTALL_DEMO_EXTRA = "pip install 'vk-adam[demo]'"


def missing_demo_extra() -> list[str]:
    """The modules of the ``demo`` extra that cannot be imported here."""
    missing = []
    for name in DEMO_EXTRA:
        try:
            importlib.import_module(name)
        except ImportError:
            missing.append(name)
    return missing


def _demo_extra_error(command: str) -> int | None:
    """Exit status 2, with a line saying what to install, when the ``demo`` extra is missing."""
    missing = missing_demo_extra()
    if not missing:
        return None
    print(
        f"vk-adam: error: `vk-adam {command}` needs {' and '.join(missing)}, which `pip install "
        f"vk-adam` leaves out: {INSTALL_DEMO_EXTRA}",
        file=sys.stderr,
    )
    return 2


def add_demo_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``vk-adam demo`` options."""
    from .demo.config import add_demo_arguments as add

    add(parser)


def run_demo(args: argparse.Namespace) -> int:
    """``vk-adam demo``."""
    if (status := _demo_extra_error("demo")) is not None:
        return status
    from .demo import run_demo as run

    return run(args)


def add_bench_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``vk-adam bench`` options."""
    from .bench import add_bench_arguments as add

    add(parser)


def run_bench(args: argparse.Namespace) -> int:
    """``vk-adam bench``."""
    if (status := _demo_extra_error("bench")) is not None:
        return status
    from .bench import run_bench as run

    return run(args)


__all__ = [
    "DEMO_EXTRA",
    "INSTALL_DEMO_EXTRA",
    "add_bench_arguments",
    "add_demo_arguments",
    "missing_demo_extra",
    "run_bench",
    "run_demo",
]
