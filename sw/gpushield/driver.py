"""Driver shim for GPUShield: what the GPU driver does around a kernel launch.

- :class:`SparseMemory` — GPU memory as a sparse map of 16-byte words (the RBT lives here;
  the BCU fetches entries from it over ``mem_req``/``mem_resp``).
- :class:`Driver` — allocates buffers (global buffers, one local buffer per thread, one
  heap region, and size-aligned Type 3 buffers) in a 48-bit virtual address space; at
  every :meth:`Driver.launch` it draws a fresh 64-bit id key and a new kernel id, gives
  every buffer of the kernel a fresh random unique 14-bit id, encrypts the ids into the
  buffers' pointers and writes their RBT entries; it decodes the BCU's violation log.

Concurrent kernels: each launch names a kernel slot of the BCU, and each slot has its own
RBT, allocated aligned to :data:`~hw.gpushield.layout.RBT_BYTES` (the BCU protects an
active slot's RBT from stores by comparing address bits 47..18 only), so several kernels
of one context run at once, one per slot, each with its own key, kernel id and ids for the
buffers it names. Entries of earlier launches on a slot stay in its table unless
``launch(scrub=True)`` invalidates them; the kernel-id check of the BCU rejects them
(cause 3).
"""
import random
from dataclasses import dataclass, field

from hw.gpushield.layout import (
    ID_BITS,
    KERNEL_ID_BITS,
    KEY_BITS,
    MAX_SLOTS,
    RBT_BYTES,
    RBT_ENTRY_BYTES,
    VA_BITS,
    Cause,
    check_slots,
    log_layout,
    resp_layout,
)

from .model import encrypt_id, pack_entry, t1_pointer, t2_pointer, t3_pointer, unpack_fields

__all__ = ["SparseMemory", "Buffer", "Launch", "Violation", "Driver", "rbt_memory_process", "run_amaranth_sim"]


class SparseMemory:
    """GPU memory in 16-byte words; unwritten words read as zero."""

    def __init__(self):
        self.words = {}

    def read128(self, addr):
        if addr % 16:
            raise ValueError(f"unaligned 16-byte read at {addr:#x}")
        return self.words.get(addr, 0)

    def write128(self, addr, value):
        if addr % 16:
            raise ValueError(f"unaligned 16-byte write at {addr:#x}")
        if not 0 <= value < (1 << 128):
            raise ValueError("not a 128-bit value")
        self.words[addr] = value


@dataclass
class Buffer:
    name: str
    base: int
    size: int
    kind: str                  # "global", "local", "heap" or "t3"
    read_only: bool = False
    log2_size: int = None      # Type 3 buffers
    id: int = None             # this launch's buffer id (Type 2)

    @property
    def end(self):
        return self.base + self.size


@dataclass
class Launch:
    """One kernel launch: its configuration and the pointers the kernel receives."""
    kernel_id: int
    id_key: int
    rbt_base: int
    buffers: dict                       # name -> Buffer (ids of this launch)
    pointers: dict = field(default_factory=dict)   # name -> tagged pointer to the base
    slot: int = 0                       # the BCU kernel slot it runs on

    def ptr(self, name, offset=0):
        """The tagged pointer to byte *offset* of buffer *name* (pointer arithmetic keeps
        the upper bits)."""
        p = self.pointers[name]
        return (p & ~((1 << VA_BITS) - 1)) | ((self.buffers[name].base + offset) & ((1 << VA_BITS) - 1))

    @property
    def config(self):
        """The slot's configuration ports: ``{"rbt_base", "kernel_id", "id_key"}``."""
        return {"rbt_base": self.rbt_base, "kernel_id": self.kernel_id, "id_key": self.id_key}


@dataclass
class Violation:
    count: int
    tag: int
    cause: Cause
    lane: int
    addr: int


class Driver:
    """Buffers, ids, keys and the RBTs of one GPU context.

    *rbt_base* is where the context's RBTs start: slot *s*'s table at
    ``rbt_base + s * RBT_BYTES`` (:meth:`rbt_base_of`); it must be aligned to
    :data:`~hw.gpushield.layout.RBT_BYTES`, else ValueError (the BCU protects an RBT by its
    aligned 256 KiB block). Buffers are placed from *va_start* up, below the RBTs (two
    contexts sharing one memory need different *va_start* and *rbt_base*). *slots*: the
    kernel slots of the BCU the context may use.
    """

    VA_START = 0x2000_0000_0000
    ALIGN = 256                       # cudaMalloc alignment

    def __init__(self, rng=None, mem=None, rbt_base=0x7000_0000_0000, lanes=32, slots=MAX_SLOTS,
                 va_start=VA_START):
        self.rng = rng or random.Random()
        self.mem = mem if mem is not None else SparseMemory()
        self.slots = check_slots(slots)
        if rbt_base % RBT_BYTES or not 0 <= rbt_base <= (1 << VA_BITS) - slots * RBT_BYTES:
            raise ValueError(f"RBT base {rbt_base:#x} is not aligned to {RBT_BYTES:#x} bytes "
                             f"with room for {slots} tables below 2**{VA_BITS}")
        if not 0 <= va_start < rbt_base:
            raise ValueError(f"va_start {va_start:#x} is not below the RBTs at {rbt_base:#x}")
        self.rbt_base = rbt_base
        self.lanes = lanes
        self.buffers = {}
        self._next_va = va_start
        self.kernel_id = self.rng.randrange(1 << KERNEL_ID_BITS)
        self.written = {s: set() for s in range(slots)}   # RBT entries written, per slot
        self.launches = {}                # slot -> its last Launch
        self.current = None               # the last launch on any slot

    def rbt_base_of(self, slot):
        """The address of slot *slot*'s RBT (aligned to RBT_BYTES)."""
        if not 0 <= slot < self.slots:
            raise ValueError(f"slot {slot} is not in 0..{self.slots - 1}")
        return self.rbt_base + slot * RBT_BYTES

    # -------------------------------------------------------------- allocation
    def _place(self, size, align, gap):
        base = -(-(self._next_va + gap) // align) * align
        self._next_va = base + max(size, 1)
        if self._next_va >= self.rbt_base:
            raise MemoryError("virtual address space exhausted")
        return base

    def alloc_global(self, name, size, read_only=False, gap=None):
        """A global buffer of *size* bytes; *gap* bytes (default: random 0..2 KiB) before it."""
        gap = self.rng.randrange(0, 2048) if gap is None else gap
        return self._add(Buffer(name, self._place(size, self.ALIGN, gap), size, "global", read_only))

    def place_global(self, name, base, size, read_only=False):
        """A global buffer at a *base* the caller chooses, any alignment (the BCU compares
        any base): directed tests that need given bit patterns in bases and sizes. The
        allocator's own placement does not move; a buffer may run past 2**48 (the limit's
        carry), not start there."""
        if not 0 <= base < (1 << VA_BITS):
            raise ValueError(f"buffer base {base:#x} is not a {VA_BITS}-bit virtual address")
        return self._add(Buffer(name, base, size, "global", read_only))

    def alloc_local(self, name, size, threads):
        """Per-thread local memory: one buffer (and id) per thread, ``name[i]``, packed
        back to back; returns the names."""
        names = []
        for t in range(threads):
            names.append(self._add(Buffer(f"{name}[{t}]", self._place(size, 16, 0), size, "local")).name)
        return names

    def alloc_heap(self, name, size):
        """The kernel's heap: one region, one id (GPUShield protects the heap as a whole)."""
        if any(b.kind == "heap" for b in self.buffers.values()):
            raise ValueError("one heap region per context")
        return self._add(Buffer(name, self._place(size, self.ALIGN, 0), size, "heap"))

    def alloc_t3(self, name, log2_size, read_only=False):
        """A Type 3 buffer: 2**log2_size bytes aligned to its size (checked without the RBT)."""
        size = 1 << log2_size
        return self._add(Buffer(name, self._place(size, size, 0), size, "t3", read_only, log2_size))

    def _add(self, buf):
        if buf.name in self.buffers:
            raise ValueError(f"buffer {buf.name} exists")
        if not 0 <= buf.size < (1 << 32):
            raise ValueError("buffer size must fit in 32 bits")
        self.buffers[buf.name] = buf
        return buf

    def free(self, name):
        del self.buffers[name]

    # -------------------------------------------------------------- launch
    def launch(self, scrub=False, slot=0, names=None, key=None):
        """A new kernel launch on BCU slot *slot*: fresh key (or *key*, for directed tests),
        kernel id and buffer ids for the buffers *names* (default: every live buffer); the
        slot's RBT written. Returns the :class:`Launch` (program its ``config`` into the
        slot's ports, then pulse its launch). The kernel id differs from those of the other
        slots' last launches (concurrent kernels never share one)."""
        rbt = self.rbt_base_of(slot)
        names = list(self.buffers) if names is None else list(names)
        unknown = [n for n in names if n not in self.buffers]
        if unknown:
            raise ValueError(f"unknown buffers {unknown}")
        if key is None:
            key = self.rng.getrandbits(KEY_BITS)
        elif not 0 <= key < 1 << KEY_BITS:
            raise ValueError(f"id key {key:#x} is not a {KEY_BITS}-bit value")
        running = {la.kernel_id for s, la in self.launches.items() if s != slot}
        while True:
            self.kernel_id = (self.kernel_id + 1 + self.rng.randrange(16)) % (1 << KERNEL_ID_BITS)
            if self.kernel_id not in running:
                break
        written = self.written[slot]
        if scrub:
            for i in written:
                self.mem.write128(rbt + RBT_ENTRY_BYTES * i, 0)
            written.clear()
        bufs = [self.buffers[n] for n in names]
        checked = [b for b in bufs if b.kind != "t3"]
        ids = self.rng.sample(range(1 << ID_BITS), len(checked))
        pointers = {}
        for buf, i in zip(checked, ids):
            buf.id = i
            self.mem.write128(rbt + RBT_ENTRY_BYTES * i,
                              pack_entry(buf.base, buf.size, 1, int(buf.read_only), self.kernel_id))
            written.add(i)
            pointers[buf.name] = t2_pointer(buf.base, encrypt_id(i, key))
        for buf in bufs:
            if buf.kind == "t3":
                pointers[buf.name] = t3_pointer(buf.base, buf.log2_size)
        self.current = Launch(self.kernel_id, key, rbt, {b.name: Buffer(**vars(b)) for b in bufs},
                              pointers, slot)
        self.launches[slot] = self.current
        return self.current

    def unchecked_pointer(self, name, offset=0):
        """A Type 1 pointer (the compiler proved the access safe)."""
        return t1_pointer(self.buffers[name].base + offset)

    # -------------------------------------------------------------- violation log
    def read_log(self, log_first, log_count):
        """The first violation (or None) from the BCU's ``log_first``/``log_count``."""
        if not log_count:
            return None
        f = unpack_fields(log_layout(self.lanes), log_first)
        return Violation(log_count, f["tag"], Cause(f["cause"]), f["lane"], f["addr"])


def rbt_memory_process(dut, mem):
    """An Amaranth-simulator process that answers the BCU's ``mem_req`` RBT fetches from
    *mem* (a :class:`SparseMemory`), in order, one answer at a time."""
    async def memory(ctx):
        pending = []
        async for _, _, v, a, rv, rr in ctx.tick().sample(
                dut.mem_req.valid, dut.mem_req.payload.addr, dut.mem_resp.valid, dut.mem_resp.ready):
            ctx.set(dut.mem_req.ready, 1)
            if rv and rr:
                pending.pop(0)
                ctx.set(dut.mem_resp.valid, 0)
            if v:
                pending.append(a)
            if pending:
                ctx.set(dut.mem_resp.valid, 1)
                ctx.set(dut.mem_resp.payload.data, mem.read128(pending[0]))
    return memory


def run_amaranth_sim(dut, bench, mem, got, resp_ready=None):
    """Run the Amaranth testbench *bench* against *dut* (a ``BCU`` or ``BCUCSR``) on the
    Amaranth simulator, RBT fetches answered from *mem* (:func:`rbt_memory_process`); every
    transferred response is appended to *got* (``resp_layout`` fields), which *bench* may
    watch. *resp_ready*, if given, is called each cycle for ``resp.ready``."""
    from amaranth.sim import Simulator

    async def responses(ctx):
        async for _, _, v, rdy, p in ctx.tick().sample(dut.resp.valid, dut.resp.ready,
                                                      dut.resp.payload.as_value()):
            if v and rdy:
                got.append(unpack_fields(resp_layout, p))
            if resp_ready is not None:
                ctx.set(dut.resp.ready, resp_ready())

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.add_process(responses)
    sim.add_process(rbt_memory_process(dut, mem))
    sim.run()
