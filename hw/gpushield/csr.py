"""``BCUCSR`` (design ``bcu_csr``): the :class:`~hw.gpushield.core.BCU` with its configuration,
violation log and counters reached as registers over one CSR bus port (:mod:`hw.csr`);
the ``req``/``resp``/``mem_req``/``mem_resp`` streams stay ports, and ``irq`` is the sticky
``STATUS.exc`` bit gated by ``CTRL.irq_en``.

:func:`doc_table` is the register table that docs/gpushield.md includes (``python -m
scripts.gen_docs`` rewrites it there; tb/gpushield/test_csr.py checks that the two agree).
"""
from pathlib import Path

from amaranth.hdl import Cat, Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from hw.csr import Access, Field, Register, RegisterFile, RegisterMap, Signature

from .core import BCU
from .layout import check_lanes, lane_bits, mem_req_layout, mem_resp_layout, req_layout, resp_layout

__all__ = ["BCUCSR", "register_map", "DOC_BEGIN", "DOC_END", "doc_table"]

R, W, RW, W1C, WO = Access.R, Access.W, Access.RW, Access.W1C, Access.WO


def register_map(lanes=32):
    """The ``bcu_csr`` register map (the lane field of LOG_INFO is log2 lanes wide)."""
    lb = lane_bits(check_lanes(lanes))
    return RegisterMap("bcu_csr", desc="GPUShield Bounds-Checking Unit (hw/gpushield/csr.py).",
                       addr_width=8, registers=[
        Register(0x00, "CTRL", "Control", [
            Field("precise", 1, RW, desc="1: precise mode (`exc` pulse per violation); 0: logging mode"),
            Field("launch", 1, W, desc="write 1: kernel launch — flush both RCaches, clear the log"),
            Field("irq_en", 1, RW, desc="drive `irq` from STATUS.exc"),
        ]),
        Register(0x04, "KERNEL_ID", "Kernel id of the running launch", [
            Field("id", 12, RW, desc="compared with the kernel id of each RBT entry"),
        ]),
        Register(0x08, "RBT_BASE_LO", "Region Bounds Table base address, bits 31..0", [
            Field("addr", 32, RW, desc="GPU address of RBT entry 0"),
        ]),
        Register(0x0C, "RBT_BASE_HI", "Region Bounds Table base address, bits 47..32", [
            Field("addr", 16, RW, desc="GPU address of RBT entry 0, upper bits"),
        ]),
        Register(0x10, "ID_KEY_LO", "Per-launch id key, bits 31..0 (write-only)", [
            Field("key", 32, WO, desc="Feistel key K bits 31..0; reads as zero"),
        ]),
        Register(0x14, "ID_KEY_HI", "Per-launch id key, bits 63..32 (write-only)", [
            Field("key", 32, WO, desc="Feistel key K bits 63..32; reads as zero"),
        ]),
        Register(0x18, "STATUS", "Sticky status", [
            Field("exc", 1, W1C, desc="set by every `exc` pulse (precise mode); write 1 to clear"),
        ]),
        Register(0x1C, "LOG_COUNT", "Violations since reset or the last launch", [
            Field("count", 32, R, desc="failing responses (saturating)"),
        ]),
        Register(0x20, "LOG_INFO", "First violation: tag, cause, lane", [
            Field("tag", 16, R, desc="`req.tag` of the first failing request"),
            Field("cause", 3, R, desc="its cause (1 bounds, 2 read-only, 3 kernel, 4 invalid entry, 5 pointer type)"),
            Field("lane", lb, R, desc="the logged lane"),
        ]),
        Register(0x24, "LOG_ADDR_LO", "First violation: lane address, bits 31..0", [
            Field("addr", 32, R, desc="virtual address of the logged lane"),
        ]),
        Register(0x28, "LOG_ADDR_HI", "First violation: lane address, bits 47..32", [
            Field("addr", 16, R, desc="virtual address of the logged lane, upper bits"),
        ]),
        Register(0x2C, "L1_HITS", "Type 2 lookups answered by the L1 RCache", [
            Field("count", 32, R, desc="since reset, wrapping"),
        ]),
        Register(0x30, "L2_HITS", "Type 2 lookups answered by the L2 RCache", [
            Field("count", 32, R, desc="since reset, wrapping"),
        ]),
        Register(0x34, "MISSES", "Type 2 lookups fetched from the RBT", [
            Field("count", 32, R, desc="since reset, wrapping"),
        ]),
    ])


class BCUCSR(wiring.Component):
    """``BCU`` plus a register file on the ``csr`` port (:func:`register_map`)."""

    def __init__(self, lanes=32):
        self.lanes = check_lanes(lanes)
        self.regmap = register_map(lanes)
        super().__init__({
            "csr": In(Signature(self.regmap.addr_width, self.regmap.data_width)),
            "req": In(stream.Signature(req_layout(lanes))),
            "resp": Out(stream.Signature(resp_layout)),
            "mem_req": Out(stream.Signature(mem_req_layout)),
            "mem_resp": In(stream.Signature(mem_resp_layout)),
            "irq": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.bcu = bcu = BCU(self.lanes)
        m.submodules.regs = regs = RegisterFile(self.regmap, ports=("csr",))
        wiring.connect(m, wiring.flipped(self.csr), regs.csr)
        for port in ("req", "mem_resp"):
            wiring.connect(m, wiring.flipped(getattr(self, port)), getattr(bcu, port))
        for port in ("resp", "mem_req"):
            wiring.connect(m, getattr(bcu, port), wiring.flipped(getattr(self, port)))
        ctrl = regs["CTRL"]
        m.d.comb += [
            bcu.precise.eq(ctrl["precise"].q),
            bcu.launch.eq(ctrl["launch"].stb & ctrl["launch"].data),
            bcu.kernel_id.eq(regs["KERNEL_ID"]["id"].q),
            bcu.rbt_base.eq(Cat(regs["RBT_BASE_LO"]["addr"].q, regs["RBT_BASE_HI"]["addr"].q)),
            bcu.id_key.eq(Cat(regs["ID_KEY_LO"]["key"].q, regs["ID_KEY_HI"]["key"].q)),
            regs["STATUS"]["exc"].set.eq(bcu.exc),
            self.irq.eq(regs["STATUS"]["exc"].q & ctrl["irq_en"].q),
            regs["LOG_COUNT"]["count"].r.eq(bcu.log_count),
            regs["LOG_INFO"]["tag"].r.eq(bcu.log_first.tag),
            regs["LOG_INFO"]["cause"].r.eq(bcu.log_first.cause),
            regs["LOG_INFO"]["lane"].r.eq(bcu.log_first.lane),
            regs["LOG_ADDR_LO"]["addr"].r.eq(bcu.log_first.addr[:32]),
            regs["LOG_ADDR_HI"]["addr"].r.eq(bcu.log_first.addr[32:]),
            regs["L1_HITS"]["count"].r.eq(bcu.l1_hits),
            regs["L2_HITS"]["count"].r.eq(bcu.l2_hits),
            regs["MISSES"]["count"].r.eq(bcu.misses),
        ]
        return m


DOC = Path(__file__).resolve().parents[2] / "docs" / "gpushield.md"
DOC_BEGIN = "<!-- BEGIN bcu_csr registers: generated by `python -m scripts.gen_docs`; do not edit -->"
DOC_END = "<!-- END bcu_csr registers -->"


def doc_table():
    """The generated block that docs/gpushield.md carries between DOC_BEGIN and DOC_END."""
    return f"{DOC_BEGIN}\n{register_map().markdown()}{DOC_END}"
