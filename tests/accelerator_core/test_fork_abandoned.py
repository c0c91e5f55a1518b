"""A forked child does not inherit the parent's abandoned (timed-out) discovery for good."""

import subprocess
import sys
import textwrap


def test_a_child_forked_after_a_timeout_resolves_on_its_own():
    code = textwrap.dedent(
        """
        import os, signal, sys, time
        import spacr_accel_core
        from spacr_accel_core import BackendInfo, Declaration, accelerator, hookimpl

        parent = os.getpid()

        class Slow:
            SPACR_ACCEL_PLUGIN = Declaration(name="slow", priority=1.0)

            def __dir__(self):  # pluggy lists the plugin while loading it: discovery waits here
                if os.getpid() == parent:
                    time.sleep(3)  # only the parent's discovery is slow
                return list(super().__dir__())

            @hookimpl
            def spacr_accel_backend_info(self):
                return BackendInfo()

        spacr_accel_core.register(Slow(), "slow")
        spacr_accel_core.refresh()
        first = accelerator.resolve()
        assert "did not finish" in first.note, first.note
        pid = os.fork()
        if pid == 0:
            signal.alarm(30)
            again = accelerator.resolve()
            os._exit(0 if "did not finish" not in again.note else 3)
        _, status = os.waitpid(pid, 0)
        sys.exit(os.waitstatus_to_exitcode(status))
        """
    )
    env_code = ["env", "SPACR_ACCEL_PROBE_TIMEOUT=0.5", "SPACR_ACCEL_DISABLE=torch,cupy"]
    done = subprocess.run([*env_code, sys.executable, "-c", code], capture_output=True, text=True,
                          check=False, timeout=120)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
