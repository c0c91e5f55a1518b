"""The operation table and what its rows are made of: each operation declared once (in its family's
module of ``ops``), read by everything that serves it.

- ``_operations``: the table (``OPERATIONS``) and the ``operation`` decorator that fills it: per
  operation its hook's specification, result check, adapter, optional arguments, capability words,
  reference, agreement, small case, bench input and Dask form (``WholeFields``, ``OwnGraph``); the
  hooks handed to pluggy; the call built by name in the specification's order.
- ``_inputs``: the small cases and bench inputs of the filters, peaks, products, neighbours and
  registration families.
- ``_results``: the result checks and the agreements (when two answers are the same answer).
- ``_adapters``: how each plugin's implementation is called whatever it declares.
- ``_checks``: the input checks every operation shares, in memory and on Dask.
- ``_points``, ``_levels``, ``_planes``: the point operations', the levels family's and the
  whole-plane steps' result checks, agreements, adapters and inputs (and the planes' input checks).
- ``_registration_fields``: registration's fields before a backend sees them (finite, varying,
  moved into the transforms' range).
- ``_landmarks``: the landmarks family's input checks (points, their Delaunay triangles, the
  tolerance, the spacing), result checks, agreements and inputs.

May import: the contract and the kit's layer (``reference`` included). Dispatch, the devices, the
faces (``ops``' families declare the rows) and the commands read it.
"""
