"""Secure Exchange Pipe (DESIGN.md § sxp): packet definitions; the SXP itself follows."""
