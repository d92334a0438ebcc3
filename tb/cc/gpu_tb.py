"""Testbench plumbing of ``gpu_cc`` (hw/cc/gpu.py), built from the two blocks' own:

- the DMA side is :class:`tb.cc.dma_tb.DmaTB` (descriptors, statuses in order against
  :class:`sw.cc.model.CCDmaModel`, host memory behind ``rd_req``/``rd_resp``/``wr`` with
  random latency, idle cycles and back-pressure), with ``gpu_cc``'s regions: protected
  memory = ``cc_ctrl``'s ``[0, protected)``, the bounce buffer in host memory;
- the CSR buses ``host`` and ``fw`` are :class:`tb.common.csr.CsrBus` (no ``cc_ctrl`` model
  checks them: the DMA writes device memory behind its back);
- keys go in through the firmware port only (:meth:`GpuTB.install`);
- device memory is ``cc_ctrl``'s memory, loaded and read through its simulator handle
  (``ctrl.mem``), as ``DmaTB`` loads its dict; the external device-memory port
  (``mem_req``/``mem_resp``) is driven for the firewall checks;
- CC off runs :class:`gpu_cc`'s plain copy engine: the expected status and memory effect
  come from :func:`plain_copy`, a reference written here from the contract (docs/cc.md).
"""
from cocotb.triggers import ReadOnly, RisingEdge

from hw.cc.gpu import DMA_KEY_CTRL, DMA_KEY_IV, DMA_KEY_STATUS
from hw.cc.layout import Dir, Mode, Status, mem_req_layout, mem_resp_layout
from tb.common.csr import CsrBus
from tb.common.payload import pack, unpack
from tb.common.stream import StreamSink, StreamSource

from .ctrl_tb import REG
from .dma_tb import ADDR_BITS, DESC, PARAMS, DmaTB

DEPTH = PARAMS.get("depth", 256)
PROTECTED = PARAMS.get("protected", DEPTH * 3 // 4)
HOST_BASE = 1 << (ADDR_BITS - 1)            # GpuCC.host_base: host memory from here up
CTRL_ADDR_BITS = (DEPTH - 1).bit_length()
MEM_REQ, MEM_RESP = mem_req_layout(CTRL_ADDR_BITS), mem_resp_layout
KEY_GO = 1 << 8


def plain_copy(d, mem, prot, bounce):
    """What the CC-off copy engine must do with descriptor *d* on memory *mem*: (code, ctr)."""
    if d.len == 0:
        return Status.LENGTH, 0

    def inside(a, region):
        return region[0] <= a and a + d.len <= region[1]

    src_r, dst_r = (prot, bounce) if d.dir is Dir.OUT else (bounce, prot)
    if not (inside(d.src, src_r) and inside(d.dst, dst_r)):
        return Status.REGION, 0
    for k in range(d.len):
        mem[d.dst + k] = mem.get(d.src + k, 0)
    return Status.OK, 0


class GpuTB(DmaTB):
    PROT = (0, PROTECTED)
    BOUNCE = (HOST_BASE + 0x1000, HOST_BASE + 0x9000)

    def __init__(self, dut, idle=0.0, stall=0.0, latency=(1, 6)):
        super().__init__(dut, idle, stall, latency)
        self.host = CsrBus(dut, "host", self.clk)
        self.fw = CsrBus(dut, "fw", self.clk)
        self.ext_src = StreamSource(dut, "mem_req", self.clk)
        self.ext_sink = StreamSink(dut, "mem_resp", self.clk)
        dut.flr.value = 0
        dut.mode_nv.value = 0
        self.off = True             # the active mode is CC off (the plain copy engine)

    # ------------------------------------------------------------------ reset, mode
    def _forget(self, stale=False):
        """A reset or FLR aborts everything in flight: no answer to a request from before it
        (with *stale*, host memory answers them all the same, see :meth:`flr`); and it
        scrubs device memory (the reference follows)."""
        for s in (self.desc_src, self.ext_src):
            s.clear()
        if not stale:
            self.resp_src.clear()
            self.req_sink.clear()
            self._pending.clear()
        self.model.reset()
        self.expected.clear()
        self.model_mem = {a: (v if a >= HOST_BASE else 0) for a, v in self.model_mem.items()}


    async def power_on(self, mode):
        self.dut.mode_nv.value = mode.value
        self._forget()
        await self.reset()
        await self.wait_ready()
        self.off = Mode(int(self.dut.mode.value)) is Mode.OFF
        assert int(self.dut.mode.value) == mode.value, f"power-on mode {int(self.dut.mode.value)}, not {mode}"

    async def flr(self, wait=True, stale=False):
        """One-cycle FLR strobe; the testbench forgets what was in flight, as the RTL does.
        With *stale*, host memory does not see the FLR: it answers every read issued before
        it, after it, spread over its first 100 cycles (during cc_ctrl's scrub, when
        ``gpu_cc`` takes and drops host read responses)."""
        self._forget(stale)
        self._hold_responses = stale
        await RisingEdge(self.clk)
        self.dut.flr.value = 1
        await RisingEdge(self.clk)
        self.dut.flr.value = 0
        self._forget(stale)         # requests the sink caught up to the FLR edge too
        if stale:
            self._deliver_late()
        if wait:
            await self.wait_ready()
            await self.settle_mode()

    async def settle_mode(self):
        await ReadOnly()
        self.off = Mode(int(self.dut.mode.value)) is Mode.OFF
        await RisingEdge(self.clk)

    async def set_mode(self, mode):
        """The in-band tool's way: write the mode store from the host, then an FLR."""
        await self.host.write(REG["CC_MODE_SET"], mode.value)
        await self.flr()
        assert int(self.dut.mode.value) == mode.value, f"mode {int(self.dut.mode.value)} after the FLR, not {mode}"

    # ------------------------------------------------------------------ keys
    async def write_key_regs(self, port, key):
        value = int.from_bytes(key, "little")
        for k in range(8):
            await port.write(REG[f"KEY{k}"], (value >> 32 * k) & 0xFFFF_FFFF)

    async def key_status(self):
        v = await self.fw.read(DMA_KEY_STATUS)
        return {"busy": v & 1, "refused": v >> 1 & 1, "installs": v >> 8 & 0xFF}

    async def install(self, ch, key, iv=0, expect=True):
        """The firmware's install: KEY0..7, DMA_KEY_IV, go on DMA_KEY_CTRL, wait until the
        engine took it, then zero KEY0..7 (the key then lives only in the engine)."""
        await self.write_key_regs(self.fw, key)
        await self.fw.write(DMA_KEY_IV, iv)
        await self.fw.write(DMA_KEY_CTRL, KEY_GO | ch)
        for _ in range(10_000):
            st = await self.key_status()
            if not st["busy"]:
                break
        else:
            raise AssertionError(f"key install on channel {ch} never completed")
        await self.write_key_regs(self.fw, bytes(32))
        if expect:
            self.model.install_key(ch, key, iv)

    # ------------------------------------------------------------------ memory
    def poke(self, addr, data):
        if addr >= HOST_BASE:
            self.mem[addr] = data
        else:
            self.dut.ctrl.mem[addr].value = data
        self.model_mem[addr] = data

    def dev(self, addr):
        return int(self.dut.ctrl.mem[addr].value)

    def read(self, addr):
        return self.mem.get(addr, 0) if addr >= HOST_BASE else self.dev(addr)

    async def ext_access(self, src, addr, write=0, data=0):
        """One access on the external device-memory port; returns the response dict."""
        self.ext_src.send(pack(MEM_REQ, src=src, addr=addr, write=write, data=data))
        return unpack(MEM_RESP, await self.ext_sink.recv(timeout_cycles=20_000))

    # ------------------------------------------------------------------ descriptors
    def submit(self, d, label=None):
        if self.off:
            code, ctr = plain_copy(d, self.model_mem, self.PROT, self.BOUNCE)
            self.expected.append((d.tag, code, ctr, label if label is not None else d.tag))
            self.desc_src.send(pack(DESC, **d.fields()))
            return code
        return super().submit(d, label)

    def check(self):
        assert not self.errors, f"{len(self.errors)} mismatches, first: " + "; ".join(self.errors[:3])
        bad = [a for a in set(self.mem) | set(self.model_mem)
               if self.read(a) != self.model_mem.get(a, 0)]
        assert not bad, f"memory differs from the reference at {len(bad)} blocks, first {hex(min(bad))}"
