"""spacr-accel's cupy backend (registered under the ``spacr_accel`` entry point ``cupy``)."""
