"""Run ``vk-adam bench`` from a checkout: ``python benchmarks/run.py --cases lora``."""

import sys

from vk_adam.cli import main

if __name__ == "__main__":
    sys.exit(main(["bench", *sys.argv[1:]]))
