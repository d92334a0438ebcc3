"""H100-style confidential mode (docs/cc.md): ``CCCtrl`` (design ``cc_ctrl``: mode
controller, reset scrub, BAR0 decoupler, protected-memory firewall, performance counters)
and ``CCDma`` (design ``cc_dma``: encrypting bounce-buffer DMA on ``gcm_core``). Enums and
layouts are in :mod:`hw.cc.layout`."""
from .ctrl import CCCtrl
from .dma import CCDma
from .layout import Dir, Mode, Src, Status

__all__ = ["CCCtrl", "CCDma", "Dir", "Mode", "Src", "Status"]
