"""What this machine is: the probers walked, the operating system's inventory, the device memory.

- ``_probers``: the prober walk and its judging; ``SPACR_DEVICE`` parsed.
- ``_machine``: the cached answers (``resolve``, ``inspect_torch``, ``neural_engines``,
  ``host_devices``) and their locks (the body of :mod:`spacr_accel_core.accelerator`).
- ``_host``: GPUs and NPUs as the operating system lists them, without a vendor library.
- ``_tasks``: the capability rows per task.
- ``_cellpose``, ``_memory``: what Cellpose is told; device memory and ``empty_cache``.

May import: the contract, the kit, the operation table, dispatch. Never a face or a backend.
"""
