"""``python -m spacr_accel_core.patch [--check] [--strict] [--report] [--keep-memory | --free-memory]
script.py args...``."""

import sys

from ._run import main

sys.exit(main(sys.argv[1:]))
