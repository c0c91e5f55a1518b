"""One side of the cluster tests in a fresh interpreter: spaCR's ``run_ops`` for the phases a plan
names, spaCR alone, patched on ``local:N`` through the variable, or patched on a ``LocalCluster``
this script starts (``install(dask=its address)``), with a worker that kills itself once mid-field.

Run as ``python cluster_child.py PLAN.json OUT.json``; the plan's keys are read in :func:`main`.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path
from typing import Any


def kill_once(flag: str, delay: float) -> Any:
    """A worker plugin that ends its worker's process a moment into the first decode field any
    worker starts, once per flag file: the field is then mid-way, and the scheduler must run it
    elsewhere. (Made here, not at import, so a side without the cluster never imports
    ``distributed``.)

    :param flag: the file whose creation claims the one kill.
    :param delay: seconds into the field.
    """
    from distributed.diagnostics.plugin import WorkerPlugin

    class KillOnce(WorkerPlugin):
        def transition(self, key: Any, start: str, finish: str, **kwargs: Any) -> None:
            if finish != "executing" or not str(key).startswith("spacr-decode-field"):
                return
            try:
                os.close(os.open(flag, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            except FileExistsError:
                return
            threading.Timer(delay, os._exit, (1,)).start()

    return KillOnce()


def main(plan_path: str, out_path: str) -> None:
    """Run the plan and write what happened."""
    plan = json.loads(Path(plan_path).read_text())
    sys.path.insert(0, plan["benchmarks"])
    import spacr_plate  # the benchmarks folder, put first above

    cluster = None
    client = None
    before: list[str] = []
    if plan.get("external"):
        import distributed

        cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                           dashboard_address=None)
        client = distributed.Client(cluster, set_as_default=False)
        if plan.get("kill_flag"):
            client.register_plugin(kill_once(plan["kill_flag"], plan.get("kill_delay", 0.3)), name="kill-once")
        from spacr_accel_core import patch

        assert patch.install(dask=cluster.scheduler_address)
        before = sorted(client.scheduler_info()["workers"])
    from spacr import ops_engine

    spacr_plate.install_threshold_model(ops_engine)
    error = None
    try:
        result = ops_engine.run_ops(plan["settings"], wells=plan["wells"], phases=plan["phases"],
                                    library=plan["library"])
        db = result["db"]
    except Exception as raised:  # the plan may expect it; the parent reads its type and words
        error, db = f"{type(raised).__name__}: {raised}", None
    fields: dict[str, int] = {}
    patched = False
    if "spacr_accel_core.patch" in sys.modules:
        from spacr_accel_core import patch

        fields, patched = patch.fields_on_workers(), patch.installed()
    workers: dict[str, list[str]] = {}
    if client is not None:
        workers = {"before": before, "after": sorted(client.scheduler_info()["workers"])}
    Path(out_path).write_text(json.dumps({"db": db, "error": error, "fields": fields, "patched": patched,
                                          "distributed": "distributed" in sys.modules, "workers": workers}))
    if client is not None:
        from spacr_accel_core import patch

        patch.uninstall()  # the patch's own client goes before the cluster does
        client.close()
    if cluster is not None:
        cluster.close()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
