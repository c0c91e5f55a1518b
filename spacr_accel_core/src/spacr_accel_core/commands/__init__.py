"""The ``spacr-accel`` command and its subcommands.

- ``_cli``: the command's parser and entry point (the console script names ``spacr_accel_core.commands._cli:main``).
- ``_doctor``, ``_doctor_summary``: ``spacr-accel doctor``, the machine, the plugins, the settings.
- ``_warm``: ``spacr-accel warm``, every backend's lazily built pieces built now, with a progress bar.
- ``_bench``: ``spacr-accel bench``, each operation's cases on each backend, checked against the floor.

May import: everything in the core (it is the top layer, with ``testing``); nothing imports it
but the command line.
"""
