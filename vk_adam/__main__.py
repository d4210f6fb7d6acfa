"""``python -m vk_adam`` is the ``vk-adam`` command."""

import sys

from .cli import main

sys.exit(main())
