"""What the accelerator's truthfulness costs: ``resolve()`` and the doctor, side by side in one run.

Each figure is the median of fresh processes (a first call is what a user pays: every worker, every
CLI start), measured back to back so the machine's load is shared by all columns:

* ``resolve()`` as shipped: on a Linux machine without a GPU device node the torch prober lists the
  OS's cards (sysfs) and returns without importing torch;
* the same with the kernel check bypassed (on a machine with a card this is what the tiny float32
  kernel costs; without one the two columns must agree);
* the same with the device-node check bypassed: the prober imports torch to ask, as it did before
  the node check (the cost the check saves);
* the host inventory alone, in process, cold each time (the sysfs walk and the hook);
* the doctor as a user runs it (``python -m spacr_accel_core doctor``), with the example plugins
  disabled, and with the device-node check bypassed; and its widest line outside the plugin table.

    python benchmarks/bench_accelerator.py [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from _timing import rounds, side_by_side  # the benchmarks' one timer, beside this file

RESOLVE = """
import json, sys, time
mode = sys.argv[1]
from spacr_accel_torch import _nodes, _probe
if mode == "no-kernel-check":
    _probe._kernel_check = lambda torch, found: found
if mode == "imports-torch":
    _nodes._no_device_node = lambda: None
from spacr_accel_core import accelerator
start = time.perf_counter()
found = accelerator.resolve()
took = time.perf_counter() - start
print(json.dumps({"ms": took * 1000, "torch": "torch" in sys.modules, "kind": found.kind,
                  "usable": found.usable}))
"""

DOCTOR = """
import runpy, sys
if sys.argv[1] == "imports-torch":
    from spacr_accel_torch import _nodes
    _nodes._no_device_node = lambda: None
sys.argv = ["spacr-accel", "doctor"]
runpy.run_module("spacr_accel_core", run_name="__main__")  # python -m spacr_accel_core doctor
"""


def _environment(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPACR_")}
    env.update(extra)
    return env


def _resolve_once(mode: str) -> dict[str, object]:
    done = subprocess.run([sys.executable, "-c", RESOLVE, mode], capture_output=True, text=True,
                          check=True, env=_environment(), timeout=300)
    answer: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return answer


def _doctor_once(mode: str, **env: str) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", DOCTOR, mode], capture_output=True, text=True,
                          check=True, env=_environment(**env), timeout=300)
    return time.perf_counter() - start, done.stdout


def _widest(text: str) -> int:
    """The widest line outside the plugin table (whose reasons may run long)."""
    table = text.split("\nPlugins (best first)\n", 1)[1].split("\n\n", 1)[0].splitlines() \
        if "\nPlugins (best first)\n" in text else []
    return max((len(line) for line in text.splitlines() if line not in table), default=0)


def _host_inventory_ms(repeats: int) -> float:
    from spacr_accel_core import accelerator

    timed = side_by_side({"inventory": accelerator.host_devices}, repeats, before={"inventory": accelerator.forget})
    return timed["inventory"].median * 1000


def main() -> None:
    """Print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="fresh processes per column (median)")
    runs = parser.parse_args().runs
    if runs < 1:
        parser.error("--runs must be at least 1")

    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    python_ms = (time.perf_counter() - start) * 1000

    # interleaved, so a change in load falls on every column alike
    columns = rounds({mode: (lambda mode=mode: _resolve_once(mode))
                      for mode in ("shipped", "no-kernel-check", "imports-torch")}, runs)
    print(f"resolve(), first call of a fresh process, median of {runs} (a bare interpreter starts in "
          f"{python_ms:.0f} ms here)")
    shipped = statistics.median(float(str(r["ms"])) for r in columns["shipped"])
    for mode, results in columns.items():
        ms = statistics.median(float(str(r["ms"])) for r in results)
        torch = any(bool(r["torch"]) for r in results)
        print(f"  {mode:<16} {ms:9.1f} ms   x{ms / shipped:6.2f} of shipped   torch imported: "
              f"{'yes' if torch else 'no'}   answer: {results[0]['kind']}")
    print(f"  host inventory alone, cold: {_host_inventory_ms(20):.2f} ms (median of 20, in process)")

    doctors = {"as installed": ("shipped", {}),
               "example plugins disabled": ("shipped", {"SPACR_ACCEL_DISABLE": "openvino,opencv"}),
               "imports torch": ("imports-torch", {})}
    done = rounds({name: (lambda mode=mode, env=env: _doctor_once(mode, **env))
                   for name, (mode, env) in doctors.items()}, runs)
    timings = {name: [seconds for seconds, _ in results] for name, results in done.items()}
    widest = max(_widest(text) for _, text in done["as installed"])
    base = statistics.median(timings["as installed"])
    print(f"\nspacr-accel doctor, wall time of a fresh process, median of {runs}")
    for name, values in timings.items():
        seconds = statistics.median(values)
        print(f"  {name:<26} {seconds:6.2f} s   x{seconds / base:5.2f}")
    print(f"  widest line outside the plugin table: {widest} columns")


if __name__ == "__main__":
    main()
