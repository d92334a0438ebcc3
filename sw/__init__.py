"""Bit-exact golden models and host-side software (one sub-package per block)."""
