"""Example implementations of the ``rheo gate --impl`` protocol (see docs/gate.md)."""
