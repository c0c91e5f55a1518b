"""``import spacr_accel_core.ops`` loads only what a plain call needs.

Every Dask worker, CLI start and script pays the package's import before its first call; a module
that only a message, discovery or a backend needs (``importlib.metadata`` alone is tens of
milliseconds) must be imported there, not with the package. Each check runs in a fresh
interpreter, since this one has imported everything already.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

UNNEEDED = ("importlib.metadata", "scipy", "torch", "cupy", "dask", "numba")


def _imported_by(script: str) -> dict[str, list[str]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPACR_ACCEL")}
    code = f"UNNEEDED = {UNNEEDED!r}\n" + textwrap.dedent("""
        import json, sys

        def loaded():
            return sorted(m for m in sys.modules if any(m == u or m.startswith(u + ".") for u in UNNEEDED))
    """) + textwrap.dedent(script)
    done = subprocess.run([sys.executable, "-c", code], check=False, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    answer: dict[str, list[str]] = json.loads(done.stdout.splitlines()[-1])
    return answer


def test_importing_ops_loads_no_discovery_message_or_backend_library() -> None:
    seen = _imported_by("""
        import spacr_accel_core.ops
        after_import = loaded()
        import numpy as np
        from spacr_accel_core import ops
        ops.maximum_filter(np.zeros((8, 8), np.float32), 3)
        print(json.dumps({"after_import": after_import, "after_call": loaded()}))
    """)
    assert seen["after_import"] == []
    assert "importlib.metadata" in seen["after_call"]  # the control: discovery reads the entry points


def test_an_install_command_still_reads_the_install_record() -> None:
    seen = _imported_by("""
        from spacr_accel_core.toolkit import install_command
        before = loaded()
        command = install_command("torch")
        assert command.endswith("torch") or command.endswith("[torch]'"), command
        print(json.dumps({"before": before, "after": loaded()}))
    """)
    assert "importlib.metadata" not in seen["before"]
    assert "importlib.metadata" in seen["after"]
