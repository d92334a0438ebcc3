"""``BCUCSR`` (design ``bcu_csr``): the :class:`~hw.gpushield.core.BCU` with its configuration,
violation log and counters reached as registers over one CSR bus port (:mod:`hw.csr`);
the ``req``/``resp``/``mem_req``/``mem_resp`` streams and ``req_slot`` stay ports, and
``irq`` is the sticky ``STATUS.exc`` bit gated by ``CTRL.irq_en``.

Kernel slots: one register bank per slot, :data:`BANK_BYTES` apart, at the same offsets as
slot 0's registers (the single-kernel map of before, unchanged): slot *s*'s ``KERNEL_ID``
at ``s * 0x40 + 0x04`` and so on, its launch and retire bits in ``S<s>_CTRL`` at
``s * 0x40``; slot 0's are in ``CTRL`` with the global bits. A bank per slot, rather than
a slot-select register, lets a driver program or read one slot without a read-modify-write
of shared state (two threads launching kernels on two slots cannot race on a select
register), and costs no more flip-flops (the configuration is stored either way).

:func:`doc_table` is the register table that docs/gpushield.md includes (``python -m
scripts.gen_docs`` rewrites it there; tb/gpushield/test_csr.py checks that the two agree).
"""
import functools
from pathlib import Path

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from hw.csr import Access, Field, Register, RegisterFile, RegisterMap, Signature

from .core import BCU
from .layout import (
    MAX_SLOTS,
    SLOT_BITS,
    check_lanes,
    check_slots,
    lane_bits,
    mem_req_layout,
    mem_resp_layout,
    req_layout,
    resp_layout,
)

__all__ = ["BCUCSR", "BANK_BYTES", "register_map", "DOC_BEGIN", "DOC_END", "doc_table"]

R, W, RW, W1C, WO = Access.R, Access.W, Access.RW, Access.W1C, Access.WO


BANK_BYTES = 0x40      # slot s's registers: the same offsets as slot 0's, at s * BANK_BYTES


def _slot_registers(slot, lb):
    """The registers of kernel slot *slot* (its bank): control, configuration and log."""
    bank, prefix = slot * BANK_BYTES, "" if slot == 0 else f"S{slot}_"
    which = "slot 0" if slot == 0 else f"slot {slot}"
    regs = []
    if slot:        # slot 0's launch and retire bits are in CTRL, beside the global bits
        regs.append(Register(bank + 0x00, f"{prefix}CTRL", f"Control of {which}", [
            Field("launch", 1, W, offset=1, desc=f"write 1: launch on {which} — flush its RCache entries, "
                                                  "clear its log, make it active"),
            Field("retire", 1, W, offset=3, desc=f"write 1: the kernel on {which} has finished — "
                                                  "requests naming it fail (cause 3)"),
        ]))
    regs += [
        Register(bank + 0x04, f"{prefix}KERNEL_ID", f"Kernel id of the launch on {which}", [
            Field("id", 12, RW, desc="compared with the kernel id of each RBT entry"),
        ]),
        Register(bank + 0x08, f"{prefix}RBT_BASE_LO", f"Region Bounds Table base of {which}, bits 31..0", [
            Field("addr", 32, RW, desc="GPU address of RBT entry 0 (256 KiB aligned: stores into "
                                       "its aligned 256 KiB block fail while the slot is active)"),
        ]),
        Register(bank + 0x0C, f"{prefix}RBT_BASE_HI", f"Region Bounds Table base of {which}, bits 47..32", [
            Field("addr", 16, RW, desc="GPU address of RBT entry 0, upper bits"),
        ]),
        Register(bank + 0x10, f"{prefix}ID_KEY_LO", f"Per-launch id key of {which}, bits 31..0 (write-only)", [
            Field("key", 32, WO, desc="Feistel key K bits 31..0; reads as zero"),
        ]),
        Register(bank + 0x14, f"{prefix}ID_KEY_HI", f"Per-launch id key of {which}, bits 63..32 (write-only)", [
            Field("key", 32, WO, desc="Feistel key K bits 63..32; reads as zero"),
        ]),
        Register(bank + 0x1C, f"{prefix}LOG_COUNT", f"Violations on {which} since reset or its last launch", [
            Field("count", 32, R, desc="failing responses (saturating)"),
        ]),
        Register(bank + 0x20, f"{prefix}LOG_INFO", f"First violation on {which}: tag, cause, lane", [
            Field("tag", 16, R, desc="`req.tag` of the first failing request"),
            Field("cause", 3, R, desc="its cause (1 bounds, 2 read-only, 3 kernel or inactive slot, "
                                      "4 invalid entry, 5 pointer type, 6 store into an RBT)"),
            Field("lane", lb, R, desc="the logged lane"),
        ]),
        Register(bank + 0x24, f"{prefix}LOG_ADDR_LO", f"First violation on {which}: lane address, bits 31..0", [
            Field("addr", 32, R, desc="virtual address of the logged lane"),
        ]),
        Register(bank + 0x28, f"{prefix}LOG_ADDR_HI", f"First violation on {which}: lane address, bits 47..32", [
            Field("addr", 16, R, desc="virtual address of the logged lane, upper bits"),
        ]),
    ]
    return regs


def register_map(lanes=32, slots=MAX_SLOTS):
    """The ``bcu_csr`` register map: slot 0's bank at 0x00 with the global registers (CTRL,
    STATUS, the counters), slot *s*'s bank at ``s * BANK_BYTES`` with the same offsets
    (the lane field of LOG_INFO is log2 lanes wide)."""
    lb = lane_bits(check_lanes(lanes))
    check_slots(slots)
    regs = [
        Register(0x00, "CTRL", "Control (global bits and slot 0's launch / retire)", [
            Field("precise", 1, RW, desc="1: precise mode (`exc` pulse per violation); 0: logging mode"),
            Field("launch", 1, W, desc="write 1: launch on slot 0 — flush its RCache entries, clear its "
                                       "log, make it active"),
            Field("irq_en", 1, RW, desc="drive `irq` from STATUS.exc"),
            Field("retire", 1, W, desc="write 1: the kernel on slot 0 has finished — requests naming it "
                                       "fail (cause 3)"),
        ]),
        Register(0x18, "STATUS", "Sticky status", [
            Field("exc", 1, W1C, desc="set by every `exc` pulse (precise mode, any slot); write 1 to clear"),
        ]),
        Register(0x2C, "L1_HITS", "Type 2 lookups answered by the L1 RCache", [
            Field("count", 32, R, desc="since reset, wrapping (every slot)"),
        ]),
        Register(0x30, "L2_HITS", "Type 2 lookups answered by the L2 RCache", [
            Field("count", 32, R, desc="since reset, wrapping (every slot)"),
        ]),
        Register(0x34, "MISSES", "Type 2 lookups fetched from the RBT", [
            Field("count", 32, R, desc="since reset, wrapping (every slot)"),
        ]),
        Register(0x38, "SLOTS", "Kernel slots", [
            Field("count", 3, R, desc="kernel slots of this unit"),
            Field("active", MAX_SLOTS, R, offset=8, desc="bit s: a kernel runs on slot s (launched, not retired)"),
        ]),
    ]
    for slot in range(slots):
        regs += _slot_registers(slot, lb)
    return RegisterMap("bcu_csr", desc="GPUShield Bounds-Checking Unit (hw/gpushield/csr.py).",
                       addr_width=8, registers=sorted(regs, key=lambda r: r.addr))


class BCUCSR(wiring.Component):
    """``BCU`` plus a register file on the ``csr`` port (:func:`register_map`); ``req_slot``
    stays a port beside ``req``."""

    def __init__(self, lanes=32, slots=MAX_SLOTS):
        self.lanes = check_lanes(lanes)
        self.slots = check_slots(slots)
        self.regmap = register_map(lanes, slots)
        super().__init__({
            "csr": In(Signature(self.regmap.addr_width, self.regmap.data_width)),
            "req": In(stream.Signature(req_layout(lanes))),
            "req_slot": In(SLOT_BITS),
            "resp": Out(stream.Signature(resp_layout)),
            "mem_req": Out(stream.Signature(mem_req_layout)),
            "mem_resp": In(stream.Signature(mem_resp_layout)),
            "irq": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.bcu = bcu = BCU(self.lanes, self.slots)
        m.submodules.regs = regs = RegisterFile(self.regmap, ports=("csr",))
        wiring.connect(m, wiring.flipped(self.csr), regs.csr)
        for port in ("req", "mem_resp"):
            wiring.connect(m, wiring.flipped(getattr(self, port)), getattr(bcu, port))
        for port in ("resp", "mem_req"):
            wiring.connect(m, getattr(bcu, port), wiring.flipped(getattr(self, port)))
        ctrl = regs["CTRL"]
        active = Signal(self.slots, name="slots_active")   # the BCU's own bits, mirrored
        m.d.comb += [
            bcu.req_slot.eq(self.req_slot),
            bcu.precise.eq(ctrl["precise"].q),
            regs["STATUS"]["exc"].set.eq(bcu.exc),
            self.irq.eq(regs["STATUS"]["exc"].q & ctrl["irq_en"].q),
            regs["L1_HITS"]["count"].r.eq(bcu.l1_hits),
            regs["L2_HITS"]["count"].r.eq(bcu.l2_hits),
            regs["MISSES"]["count"].r.eq(bcu.misses),
            regs["SLOTS"]["count"].r.eq(self.slots),
            regs["SLOTS"]["active"].r.eq(active),
        ]
        for s in range(self.slots):
            prefix = "" if s == 0 else f"S{s}_"
            port = functools.partial(bcu.slot_port, slot=s)
            launch, retire = ctrl["launch"], ctrl["retire"]
            if s:
                launch, retire = regs[f"{prefix}CTRL"]["launch"], regs[f"{prefix}CTRL"]["retire"]
            log = port("log_first")
            m.d.comb += [
                port("launch").eq(launch.stb & launch.data),
                port("retire").eq(retire.stb & retire.data),
                port("kernel_id").eq(regs[f"{prefix}KERNEL_ID"]["id"].q),
                port("rbt_base").eq(Cat(regs[f"{prefix}RBT_BASE_LO"]["addr"].q,
                                        regs[f"{prefix}RBT_BASE_HI"]["addr"].q)),
                port("id_key").eq(Cat(regs[f"{prefix}ID_KEY_LO"]["key"].q, regs[f"{prefix}ID_KEY_HI"]["key"].q)),
                regs[f"{prefix}LOG_COUNT"]["count"].r.eq(port("log_count")),
                regs[f"{prefix}LOG_INFO"]["tag"].r.eq(log.tag),
                regs[f"{prefix}LOG_INFO"]["cause"].r.eq(log.cause),
                regs[f"{prefix}LOG_INFO"]["lane"].r.eq(log.lane),
                regs[f"{prefix}LOG_ADDR_LO"]["addr"].r.eq(log.addr[:32]),
                regs[f"{prefix}LOG_ADDR_HI"]["addr"].r.eq(log.addr[32:]),
            ]
            # the same rule as the BCU's active bits (a launch in the retire cycle wins)
            with m.If(port("launch")):
                m.d.sync += active[s].eq(1)
            with m.Elif(port("retire")):
                m.d.sync += active[s].eq(0)
        return m


DOC = Path(__file__).resolve().parents[2] / "docs" / "gpushield.md"
DOC_BEGIN = "<!-- BEGIN bcu_csr registers: generated by `python -m scripts.gen_docs`; do not edit -->"
DOC_END = "<!-- END bcu_csr registers -->"


def doc_table():
    """The generated block that docs/gpushield.md carries between DOC_BEGIN and DOC_END."""
    return f"{DOC_BEGIN}\n{register_map().markdown()}{DOC_END}"
