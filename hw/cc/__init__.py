"""H100-style confidential mode (docs/cc.md): ``CCCtrl`` (design ``cc_ctrl``: mode
controller, reset scrub, BAR0 decoupler, protected-memory firewall, performance counters)
and ``CCDma`` (design ``cc_dma``: encrypting bounce-buffer DMA on ``gcm_core``), and
``GpuCC`` (design ``gpu_cc``: both in one H100-style top sharing the device memory). Enums
and layouts are in :mod:`hw.cc.layout`."""
from .ctrl import CCCtrl
from .dma import CCDma
from .gpu import GpuCC
from .layout import Dir, Mode, Src, Status

__all__ = ["CCCtrl", "CCDma", "GpuCC", "Dir", "Mode", "Src", "Status"]
