"""Dispatch: finding the plugins, ranking them, and calling the best one for each operation.

- ``_settings``: every setting's name and the one place the environment is read; the context-local
  overrides (the body of :mod:`spacr_accel_core.config`).
- ``_bounded``: how a call that may hang is bounded (the daemon thread, ``call_bounded``).
- ``_discovery``: entry points, de-duplication (a name belongs to ``spacr-accel-<name>``), loading,
  the declaration read and judged.
- ``_ranking``: the order (priority, name, the floor last), why a plugin is passed over, the fix line.
- ``_registry``: the snapshot, the lazy bounded questions, quarantine, the per-call dispatch.
- ``_waiting``: a forced backend still building, asked again until its call's piece is ready (bounded).

May import: the contract, the kit, the operation table. Never the devices, a face or a backend.
"""
