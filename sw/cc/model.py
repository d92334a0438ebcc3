"""Golden models of the confidential-mode blocks (docs/cc.md).

- :class:`CCCtrlModel` — ``cc_ctrl`` cycle by cycle: :meth:`~CCCtrlModel.step` takes what
  the ports carry in one clock cycle (host and firmware CSR strobes, a memory request
  transfer, a response transfer, ``flr``) and returns what the block answers: read data
  (visible in the next cycle) and the memory response. It is built from the same data as
  the RTL (the register map and allow-list of :mod:`hw.cc.regs`), never from the RTL.
  Its parts: the mode controller (store, active mode, scrub), the BAR0 decoupler
  (:func:`hw.cc.regs.allowed`), the firewall (:meth:`~CCCtrlModel.firewall`) and the
  performance counters.
- :class:`CCDmaModel` — ``cc_dma`` descriptor by descriptor (timing free), with
  ``cryptography``'s AESGCM as the cipher: :meth:`~CCDmaModel.process` returns the status
  and changes a memory dict as the engine must.
"""
from dataclasses import dataclass, field

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from hw.cc.layout import CTR_LIMIT, IV_TAIL, LEN_BITS, Dir, Mode, Src, Status
from hw.cc.regs import KEY_WORDS, SCRATCH_WORDS, SCRUB, allowed, register_map

from .host import blocks, iv_block, join_blocks, parse_iv

__all__ = ["Bus", "CCCtrlModel", "CCDmaModel", "Desc"]

SAT = (1 << 32) - 1
M32 = (1 << 32) - 1


@dataclass
class Bus:
    """One cycle of a CSR bus."""
    r_stb: int = 0
    w_stb: int = 0
    addr: int = 0
    w_data: int = 0


class CCCtrlModel:
    """``cc_ctrl`` with *depth* memory words, the first *protected* of them protected."""

    def __init__(self, depth=256, protected=None):
        self.depth = depth
        self.protected = depth * 3 // 4 if protected is None else protected
        self.regs = {r.addr: r for r in register_map()}
        self.names = {r.name: r.addr for r in register_map()}
        self.mem = [0] * depth
        self.power_on(Mode.OFF)

    # ------------------------------------------------------------------ mode controller
    def power_on(self, mode_nv):
        """``rst``: the store and the active mode load *mode_nv* (3 → ON); registers
        clear; the scrub starts. Memory keeps its contents until the scrub reaches it."""
        code = getattr(mode_nv, "value", mode_nv)
        nv = Mode.ON if code == 3 else Mode(code)
        self.store = self.active = nv
        self._clear()

    def _clear(self):
        self.scrubbing, self.scrub_addr = True, 0
        self.scratch = [0] * SCRATCH_WORDS
        self.key_words = [0] * KEY_WORDS
        self.perf_en = self.fault = self.bad_mode = 0
        self.dec_count = self.dec_addr = self.dec_write = 0
        self.fw_count = self.fw_addr = self.fw_src = self.fw_write = 0
        self.cycles = self.accesses = 0
        self.resp_pending = False

    @property
    def key(self):
        return sum(w << (32 * k) for k, w in enumerate(self.key_words))

    @property
    def ready(self):
        return not self.scrubbing

    def row(self, flr=0):
        return SCRUB if (self.scrubbing or flr) else self.active

    # ------------------------------------------------------------------ registers
    def read_value(self, addr):
        r = self.regs.get(addr)
        if r is None:
            return 0
        n = r.name
        if n == "CC_MODE":
            return self.active.value | self.store.value << 2 | int(self.scrubbing) << 4
        if n == "CC_STATUS":
            return self.fault | self.bad_mode << 1
        if n == "DEC_COUNT":
            return self.dec_count
        if n == "DEC_LOG":
            return self.dec_addr | self.dec_write << 8
        if n == "FW_COUNT":
            return self.fw_count
        if n == "FW_LOG":
            return self.fw_addr | self.fw_src << 24 | self.fw_write << 28
        if n == "PERF_CTRL":
            return self.perf_en
        if n == "PERF_CYCLES":
            return self.cycles
        if n == "PERF_ACCESSES":
            return self.accesses
        if n.startswith("SCRATCH"):
            return self.scratch[int(n[7:])]
        return 0                              # CC_MODE_SET (W), KEYn (WO), unmapped

    # ------------------------------------------------------------------ firewall
    def firewall(self, src, addr, write):
        """``(allowed, engine_fault)`` for a memory access in the active mode."""
        src = getattr(src, "value", src)
        if self.active is Mode.OFF:
            return True, False
        prot = addr < self.protected
        host_like = src in (Src.HOST.value, 3)
        if host_like and prot:
            return False, False
        if src == Src.ENGINE.value and write and not prot:
            return False, True
        return True, False

    # ------------------------------------------------------------------ one cycle
    def step(self, flr=0, host=None, fw=None, mem=None, resp_take=False):
        """One clock cycle. *host*, *fw*: :class:`Bus` or None; *mem*: the ``mem_req``
        transfer of this cycle as ``(src, addr, write, data)`` or None; *resp_take*: a
        ``mem_resp`` transfer happened. Returns ``{"host": r_data or None, "fw": ...,
        "resp": (data, ok) or None}`` — read data as seen in the next cycle."""
        host, fw = host or Bus(), fw or Bus()
        out = {"host": None, "fw": None, "resp": None}
        en_before, active_before = self.perf_en, self.active   # counters use pre-edge values
        if resp_take:
            assert self.resp_pending, "mem_resp transfer with no response pending"
            self.resp_pending = False
        blocked = self.scrubbing or flr
        row = self.row(flr)
        if mem is not None:
            assert not blocked, "mem_req accepted while blocked (scrub or flr)"
            assert not self.resp_pending, "mem_req accepted with a response not taken"

        h_r = host.r_stb and not flr
        h_w = host.w_stb and not flr
        may_r = h_r and allowed(row, host.addr, False)
        may_w = h_w and allowed(row, host.addr, True)
        if host.r_stb:
            out["host"] = 0 if flr or not may_r else self.read_value(host.addr)
        if fw.r_stb:
            out["fw"] = 0 if blocked else self.read_value(fw.addr)
        if flr:
            self.active = self.store
            self._clear()
            return out

        # register writes: fw (listed first) wins over host on storage; W1C clears OR
        writes = []
        if fw.w_stb and not blocked:
            writes.append(("fw", fw.addr, fw.w_data))
        if may_w:
            writes.append(("host", host.addr, host.w_data))
        clear_status = 0
        mode_set = None
        for _, addr, value in reversed(writes):       # the first port's write lands last
            r = self.regs.get(addr)
            if r is None:
                continue
            n = r.name
            if n == "CC_MODE_SET":
                mode_set = value & 3
            elif n == "CC_STATUS":
                pass
            elif n == "PERF_CTRL":
                self.perf_en = value & 1
            elif n.startswith("KEY"):
                self.key_words[int(n[3:])] = value & M32
            elif n.startswith("SCRATCH"):
                self.scratch[int(n[7:])] = value & M32
        for _, addr, value in writes:
            if addr in self.regs and self.regs[addr].name == "CC_STATUS":
                clear_status |= value & 3

        set_bad = 0
        if mode_set is not None:
            if mode_set == 3:
                set_bad = 1
            else:
                self.store = Mode(mode_set)

        if h_r and not may_r or h_w and not may_w:
            self.dec_count = min(SAT, self.dec_count + 1)
            self.dec_addr, self.dec_write = host.addr, int(bool(h_w and not may_w))

        set_fault = 0
        if mem is not None:
            src, addr, write, data = mem
            ok, fault = self.firewall(src, addr, write)
            if ok and write:
                self.mem[addr] = data
            out["resp"] = (self.mem[addr] if ok and not write else 0, int(ok))
            self.resp_pending = True
            if not ok:
                self.fw_count = min(SAT, self.fw_count + 1)
                self.fw_addr, self.fw_src, self.fw_write = addr, getattr(src, 'value', src), int(bool(write))
            set_fault = int(fault)
        self.fault = (self.fault & ~clear_status & 1) | set_fault
        self.bad_mode = (self.bad_mode & ~(clear_status >> 1) & 1) | set_bad

        if active_before is Mode.ON:          # CC on: held at zero
            self.cycles = self.accesses = 0
        elif en_before:
            self.cycles = (self.cycles + 1) & M32
            self.accesses = (self.accesses + (mem is not None)) & M32

        if self.scrubbing:
            self.mem[self.scrub_addr] = 0
            if self.scrub_addr == self.depth - 1:
                self.scrubbing = False
            self.scrub_addr = (self.scrub_addr + 1) % self.depth
        return out


# ---------------------------------------------------------------------------- cc_dma
@dataclass
class Desc:
    dir: Dir
    ch: int
    len: int
    src: int
    dst: int
    tag: int = 0

    def fields(self):
        return {"dir": self.dir, "ch": self.ch, "len": self.len, "src": self.src,
                "dst": self.dst, "tag": self.tag}


@dataclass
class _Channel:
    key: bytes = b""
    has_key: bool = False
    tx: int = 0
    rx: int = 0


@dataclass
class CCDmaModel:
    """``cc_dma`` at descriptor level. Memory is a dict ``block address → 128-bit int``
    (missing = 0); regions are ``(base, limit)`` block addresses."""
    channels: int = 4
    frame_blocks: int = 64
    prot: tuple = (0, 0)
    bounce: tuple = (0, 0)
    chans: list = field(default_factory=list)

    def __post_init__(self):
        self.chans = [_Channel() for _ in range(self.channels)]

    def reset(self):
        self.chans = [_Channel() for _ in range(self.channels)]

    def install_key(self, ch, key, iv=0):
        """The trusted key port: *key* (32 bytes) and first IV counter *iv*."""
        if ch < self.channels:
            self.chans[ch] = _Channel(bytes(key), True, iv, iv)

    @staticmethod
    def _inside(addr, n, region):
        return region[0] <= addr and addr + n <= region[1]

    def check(self, d):
        """The issuer's verdict on descriptor *d*: a :class:`Status` (OK to go on)."""
        if d.ch >= self.channels:
            return Status.CHANNEL
        if d.len == 0 or d.len > self.frame_blocks or d.len >= 1 << LEN_BITS:
            return Status.LENGTH
        if Dir(d.dir) is Dir.OUT:
            ok = self._inside(d.src, d.len, self.prot) and self._inside(d.dst, d.len + 2, self.bounce)
        else:
            ok = self._inside(d.src, d.len + 2, self.bounce) and self._inside(d.dst, d.len, self.prot)
        return Status.OK if ok else Status.REGION

    def process(self, d, mem):
        """Run descriptor *d* against *mem*; returns ``(Status, ctr)`` — the status
        stream's ``code`` and ``ctr`` fields."""
        code = self.check(d)
        if code is not Status.OK:
            return code, 0
        c = self.chans[d.ch]
        if Dir(d.dir) is Dir.OUT:
            if not c.has_key:
                return Status.NO_KEY, 0
            if c.tx == CTR_LIMIT:
                return Status.IV_EXHAUSTED, CTR_LIMIT
            ctr, c.tx = c.tx, c.tx + 1
            iv = iv_block(ctr, Dir.OUT, d.ch)
            pt = join_blocks(mem.get(d.src + k, 0) for k in range(d.len))
            frame = iv + AESGCM(c.key).encrypt(iv[:12], pt, None)
            for k, b in enumerate(blocks(frame)):
                mem[d.dst + k] = b
            return Status.OK, ctr
        frame = join_blocks(mem.get(d.src + k, 0) for k in range(d.len + 2))
        iv = parse_iv(frame[:16])
        if not c.has_key:
            return Status.NO_KEY, iv["ctr"]
        if (iv["tail"], iv["zero"], iv["dir"], iv["ch"]) != (IV_TAIL, 0, Dir.IN.value, d.ch):
            return Status.BAD_IV, iv["ctr"]
        if iv["ctr"] < c.rx or iv["ctr"] == CTR_LIMIT:
            return Status.REPLAY, iv["ctr"]
        c.rx = iv["ctr"] + 1                  # consumed at check time (docs/cc.md)
        try:
            pt = AESGCM(c.key).decrypt(frame[:12], frame[16:], None)
        except Exception:
            return Status.AUTH, iv["ctr"]
        for k, b in enumerate(blocks(pt)):
            mem[d.dst + k] = b
        return Status.OK, iv["ctr"]
