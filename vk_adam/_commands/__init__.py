"""The work behind the ``vk-adam`` command's longer subcommands: ``bench`` and ``demo``
(``vk_adam.cli`` parses the arguments and dispatches). This file is the package's face: each
function imports its subcommand when called, so ``vk-adam info`` loads neither."""

from __future__ import annotations

import argparse


def add_demo_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``vk-adam demo`` options."""
    from .demo.config import add_demo_arguments as add

    add(parser)


def run_demo(args: argparse.Namespace) -> int:
    """``vk-adam demo``."""
    from .demo import run_demo as run

    return run(args)


def add_bench_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``vk-adam bench`` options."""
    from .bench import add_bench_arguments as add

    add(parser)


def run_bench(args: argparse.Namespace) -> int:
    """``vk-adam bench``."""
    from .bench import run_bench as run

    return run(args)


__all__ = ["add_bench_arguments", "add_demo_arguments", "run_bench", "run_demo"]
