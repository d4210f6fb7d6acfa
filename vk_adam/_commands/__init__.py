"""The work behind the ``vk-adam`` command's longer subcommands: ``bench`` and ``demo``
(``vk_adam.cli`` parses the arguments and dispatches)."""
