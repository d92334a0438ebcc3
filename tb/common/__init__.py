"""Shared testbench code: the TB base class, stream drivers/monitors, and the
pytest-side runner that builds and runs cocotb tests on Verilator."""
