"""Amaranth RTL of the confidential-accelerator blocks (one sub-package per block)."""
