"""pytest entry points of the ``cc`` block: one per design / parameter set."""
from tb.common.sim import run


def test_cc_ctrl():
    run("cc_ctrl", "tb.cc.cocotb_ctrl")


def test_cc_dma():
    run("cc_dma", "tb.cc.cocotb_dma")


def test_gpu_cc():
    run("gpu_cc", "tb.cc.cocotb_gpu")
