"""``python -m spacr_accel_core``: the ``spacr-accel`` command, for when the script is not on PATH."""

from .commands._cli import main

raise SystemExit(main())
