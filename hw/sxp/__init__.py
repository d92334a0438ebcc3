"""Secure Exchange Pipe (docs/sxp.md): packet definitions (:mod:`.packet`), the register
map and exception causes (:mod:`.regs`) and the SXP itself (:mod:`.core`)."""
from .core import SXP
from .regs import Cause, register_map

__all__ = ["SXP", "Cause", "register_map"]
