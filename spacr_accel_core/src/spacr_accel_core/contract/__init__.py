"""The plugin contract, the lowest layer: what a plugin is and what it is told.

- ``_markers``: the pluggy project name, the entry-point group, the plugin API version, the markers.
- ``_declaration``: the ``Declaration`` and ``Setting`` records and their validation at load.
- ``_hookspecs``: every hook's name, arguments and promise.
- ``_records``: the frozen records exchanged with plugins and users (``BackendInfo``, ``Accelerator``...).
- ``_registration``: the ``Registration`` record, the unwrap and verdict of a phase correlation in
  integers, the distinct reference fields of a call's pairs.
- ``_errors``: the contract's exceptions and the one-line descriptions of an exception.
- ``_install``: the command that adds an extra for how this copy was installed.

May import: nothing of the core but this folder. Public through ``spacr_accel_core`` and the toolkit.
"""
