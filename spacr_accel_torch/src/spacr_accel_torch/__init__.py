"""spacr-accel's torch backend (registered under the ``spacr_accel`` entry point ``torch``)."""
