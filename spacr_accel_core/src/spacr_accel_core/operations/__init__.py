"""The operation table: each primitive defined once, read by everything that serves it.

- ``_operations``: per operation its hook, its result check, its adapters, its optional arguments,
  its capability words (``OPERATIONS``), and the call built by name in the hookspec's order.
- ``_checks``: the input checks every operation shares, in memory and on Dask.

May import: the contract. Dispatch, the devices, the faces and the commands read it.
"""
