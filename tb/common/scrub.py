"""Reset-scrub checks: read every register, port and memory word of a design and look
for secrets and for everything derived from them; count the cycles a block refuses input
while its post-reset flush runs.

**What is read.** :class:`Scan` walks the whole hierarchy below the top and reads every
signal it can see and every element of every array — the ``lib.memory.Memory`` instances
are Verilog unpacked arrays, cocotb ``ArrayObject`` handles. The regression's models make
every register, every memory and every module port visible, and no other net
(:mod:`tb.common.visibility`: a net is a function of registers and inputs, so a secret left
after the scrub sits in a register or a memory, or comes in on a port); coverage builds
make every net visible. A handle that cannot be read
raises :class:`ScanError`: the scan never skips silently. The only exceptions are the
paths of :data:`UNREADABLE` (each with its reason; empty today: every handle of aes256,
gcm_core, sxp, cc_ctrl, cc_dma, pcie_rdtable and bcu reads). Ports the testbench drives
are left out by their path below the top (``skip``; a submodule's port of the same name
is still read).

**What is searched.** A :class:`Secret` is a byte string in the order the RTL holds it:
bus lane order, byte *k* of a value in bits ``8k+7..8k`` — every block, key and hash value
of hw/aes, hw/gcm, hw/cc and hw/sxp is laid out that way (``int.from_bytes(b, "little")``).
Its needles are all 32-bit windows at byte offsets of the byte string, each in two bit
orders: as stored, and with the bits of every byte reversed (GHASH's polynomial order,
:func:`hw.gcm.ghash.reflect`, the order the multipliers work in). A needle is searched at
every *bit* offset of every signal and memory word (values are not always byte-aligned in a
register: a packet header's address starts at bit 17). A value narrower than 32 bits
holds no whole needle: a memory of narrow words (the PCIe table at lanes 4) is checked
with :meth:`Scan.nonzero` instead (every word zero after the scrub). Derived secrets:

- :func:`aes_key_secrets`: the key and round keys 2..14 of its AES-256 schedule
  (:func:`sw.aes.expand_key`; round keys 0 and 1 are the key), whose windows the AES
  pipeline's stage registers hold;
- :func:`gcm_key_secrets`: that, plus H = E_K(0¹²⁸) and the powers H²..H^lanes;
- :func:`gcm_frame_secrets`: E_K(J0) and every GHASH partial hash of a frame, and the
  final hash S (tag = S ⊕ E_K(J0)), computed by :func:`sw.gcm.model.frame_secrets`.

**False hits.** Random 32-bit words meet a design's own values with probability about
(bits read × needles) / 2³². :meth:`Scanner.baseline` reads the design once before any
secret entered it (after the first reset): needles that the clean design already holds are
not searched afterwards (counted in :attr:`Scanner.collisions`), so the only values a false
hit can come from are those that differ from the clean state. A word with fewer than three
bytes other than 00 and FF is never a needle (a small size or counter value looks like
it; a random 32-bit word is one with probability 4·10⁻⁴).

**Positive control.** :meth:`Scanner.control` reads the live design every cycle for a
while and fails unless every required kind of secret (key, each round key, H, E_K(J0),
the partial hash, …) was found in the design's own state: it proves that the needles are
built in the byte and bit order the RTL uses, so that finding nothing after the reset
means something.

**Refused cycles.** :class:`Refusals` counts, for each reset (or FLR strobe), the cycles
from the first cycle with the reset low to the first with the input's ``ready`` high; the
tests compare the count with the RTL's own constant (``AES256.flush_cycles`` …), and scan
in that first ready cycle (``on_ready``): the moment the block claims to be clean. (A scan
some cycles later can miss a flush cut short: idle cycles feed the AES pipeline zero
bubbles too, and finish the flush after the block already took input.)
"""
import fnmatch
from dataclasses import dataclass

import cocotb
from cocotb.handle import ArrayObject, HierarchyArrayObject, HierarchyObject
from cocotb.triggers import ReadOnly, RisingEdge

__all__ = ["Secret", "Hit", "Scan", "Scanner", "ScanError", "Refusals", "UNREADABLE",
           "aes_key_secrets", "gcm_key_secrets", "gcm_frame_secrets", "bytes_secret",
           "int_secret"]

WORD = 4            # bytes of a needle
# Paths (below the top, fnmatch patterns) that may not be read, with the reason. Nothing
# is exempt today; an entry needs a reason a reviewer can check.
UNREADABLE: dict = {}


class ScanError(AssertionError):
    """A handle of the design could not be read (and is not in :data:`UNREADABLE`)."""


@dataclass(frozen=True)
class Secret:
    kind: str       # what it is ("key", "rk7", "H", "EK0", "X", "plaintext", ...)
    label: str      # which one (for messages)
    data: bytes     # in the order the RTL holds it: byte k in bits 8k+7..8k


@dataclass(frozen=True)
class Hit:
    path: str       # below the top; a memory word as "mem[12]"
    kind: str
    label: str
    order: str      # "stored" or "reflected" (bits of each byte reversed)


def bytes_secret(kind, label, data):
    return Secret(kind, label, bytes(data))


def int_secret(kind, label, value, nbytes):
    """A bus-lane integer (byte k in bits 8k+7..8k) of *nbytes* bytes."""
    return Secret(kind, label, int(value).to_bytes(nbytes, "little"))


def aes_key_secrets(key: bytes, label=""):
    """The 32-byte AES-256 *key* ("key") and round keys 2..14 of its schedule ("rk2" ..
    "rk14"; round keys 0 and 1 are the key itself)."""
    from sw.aes import expand_key

    rks = expand_key(bytes(key))
    name = label or key[:4].hex()
    return [Secret("key", name, bytes(key))] + \
        [Secret(f"rk{r}", f"{name} rk{r}", rks[r]) for r in range(2, len(rks))]


def gcm_key_secrets(key: bytes, lanes=1, label=""):
    """:func:`aes_key_secrets` plus H and its powers up to H^lanes ("H", "H^2", ...): what a
    gcm_core context derives from its key."""
    from sw.gcm.model import h_powers

    name = label or key[:4].hex()
    powers = h_powers(int.from_bytes(bytes(key), "little"), lanes)
    return aes_key_secrets(key, name) + \
        [int_secret("H" if j == 1 else f"H^{j}", f"{name} H^{j}", h, 16)
         for j, h in enumerate(powers, 1)]


def gcm_frame_secrets(key: bytes, nonce: bytes, blocks, decrypt=False, label=""):
    """E_K(J0) ("EK0") and the GHASH partial hashes after every data block plus the final
    hash S ("X") of one frame: *blocks* are the data blocks as bus-lane ints, the
    plaintext for an encryption (*decrypt* False) or the ciphertext for a decryption."""
    from sw.gcm.model import frame_secrets

    sec = frame_secrets(int.from_bytes(bytes(key), "little"), bytes(nonce), list(blocks), decrypt)
    name = label or nonce[:4].hex()
    out = [int_secret("EK0", f"{name} E_K(J0)", sec.ek0, 16)]
    out += [int_secret("X", f"{name} X{k}", x, 16) for k, x in enumerate(sec.x) if x]
    out.append(int_secret("X", f"{name} S", sec.s, 16))
    return out


_REFLECT = bytes(int(f"{b:08b}"[::-1], 2) for b in range(256))


def _needles(secrets):
    """{32-bit window (bytes): [(secret, order)]} of every secret, both bit orders."""
    needles = {}
    for s in secrets:
        for order, data in (("stored", s.data), ("reflected", s.data.translate(_REFLECT))):
            for i in range(len(data) - WORD + 1):
                w = data[i:i + WORD]
                if sum(1 for b in w if b not in (0, 0xFF)) < 3:
                    continue        # low entropy: sizes, counters and masks look like it
                entry = needles.setdefault(w, [])
                if (s, order) not in entry:
                    entry.append((s, order))
    return needles


def _windows(value, width):
    """Every 32-bit window of *value* (*width* bits) at every bit offset, as bytes."""
    out = set()
    for shift in range(8):
        n = (width - shift) // 8            # whole bytes above this bit offset
        if n < WORD:
            break
        b = (value >> shift).to_bytes((width - shift + 7) // 8, "little")
        out.update(b[i:i + WORD] for i in range(n - WORD + 1))
    return out


class Scan:
    """One reading of every visible signal and memory word below *dut* (see the module
    docstring).

    ``values``: {path below the top: (width, int)} of every readable value (memory words
    as ``name[index]``); ``memories``: {memory path: [its word paths]}. *skip*: path
    prefixes below the top left out (the ports the testbench drives, e.g. ``"i__"``)."""

    def __init__(self, dut, skip=(), unreadable=None):
        self.top = dut._path
        self.skip = tuple(skip)
        self.unreadable = UNREADABLE if unreadable is None else unreadable
        self.values, self.memories, self.exempt = {}, {}, []
        self._walk(dut)

    def _rel(self, handle):
        path = handle._path
        return path[len(self.top) + 1:] if path.startswith(self.top + ".") else path

    def _walk(self, handle):
        for child in handle:
            rel = self._rel(child)
            if self.skip and rel.startswith(self.skip):
                continue
            if isinstance(child, (HierarchyObject, HierarchyArrayObject)):
                self._walk(child)
            elif isinstance(child, ArrayObject):
                self.memories[rel] = self._read_array(child)
            else:
                self._read(child, rel)

    def _read_array(self, array):
        words = []
        for element in array:
            rel = self._rel(element)
            if isinstance(element, ArrayObject):
                words += self._read_array(element)
            else:
                self._read(element, rel)
                words.append(rel)
        return words

    def _read(self, handle, rel):
        try:
            value = handle.value
            if isinstance(value, int):              # IntegerObject (a Verilog integer)
                self.values[rel] = (32, value & 0xFFFF_FFFF)
            else:
                self.values[rel] = (len(value), int(value))
        except Exception as error:                  # noqa: BLE001  (reported, never hidden)
            reason = next((why for pat, why in self.unreadable.items() if fnmatch.fnmatch(rel, pat)),
                          None)
            if reason is None:
                raise ScanError(f"reset-scrub scan: cannot read {handle._path} "
                                f"({type(handle).__name__}): {error!r}; add it to "
                                f"tb.common.scrub.UNREADABLE with a reason, or fix the "
                                f"build so that it is visible") from error
            self.exempt.append((rel, reason))

    def bits(self):
        return sum(w for w, _ in self.values.values())

    def windows(self):
        """Every 32-bit window held anywhere (for :meth:`Scanner.baseline`)."""
        out = set()
        for width, v in self.values.values():
            if width >= 32 and v:
                out |= _windows(v, width)
        return out

    def find(self, secrets, exclude=frozenset()):
        """Hits of the needles of *secrets* that are not in *exclude*."""
        needles = _needles(secrets)
        for w in exclude & needles.keys():
            del needles[w]
        return self.find_needles(needles)

    def find_needles(self, needles):
        hits = []
        if not needles:
            return hits
        for path, (width, v) in self.values.items():
            if width < 32 or not v:
                continue
            for w in _windows(v, width) & needles.keys():
                hits += [Hit(path, s.kind, s.label, order) for s, order in needles[w]]
        return hits

    def nonzero(self, memories):
        """{memory path: number of nonzero words} of the memories whose path (below the
        top) ends with one of the names *memories* — e.g. ``("staging",)``; KeyError
        naming what exists if one of them is not found."""
        out = {}
        for name in memories:
            found = [m for m in self.memories if m == name or m.endswith("." + name)]
            if not found:
                raise KeyError(f"no memory {name!r}; the design has {sorted(self.memories)}")
            for m in found:
                out[m] = sum(1 for p in self.memories[m] if self.values[p][1])
        return {m: n for m, n in out.items() if n}


class Scanner:
    """Scans of one design under test, with a clean baseline (see the module docstring)."""

    def __init__(self, dut, skip=()):
        self.dut = dut
        self.skip = tuple(skip)
        self.clean = frozenset()
        self.collisions = 0
        self.last = None

    def scan(self):
        self.last = Scan(self.dut, self.skip)
        return self.last

    def baseline(self):
        """Read the design now, before any secret entered it: the words it holds are not
        searched afterwards. Returns the :class:`Scan`."""
        scan = self.scan()
        self.clean = frozenset(scan.windows())
        return scan

    def needles(self, secrets):
        needles = _needles(secrets)
        self.collisions = len(self.clean & needles.keys())
        for w in self.clean & needles.keys():
            del needles[w]
        return needles

    def find(self, secrets):
        """Hits of *secrets* in the design now (needles in the baseline left out)."""
        return self.scan().find_needles(self.needles(secrets))

    async def control(self, secrets, clk, cycles, need, every=1):
        """The positive control: read the design in the ``ReadOnly`` phase of every
        *every*-th cycle for *cycles* cycles (the caller's traffic keeps running) and fail
        unless every kind in *need* was found in some signal or memory word. Returns the
        kinds found. Resume after it at a clock edge (it ends in ``ReadOnly``)."""
        found, needles = {}, self.needles(secrets)
        for n in range(cycles):
            await RisingEdge(clk)
            await ReadOnly()
            if n % every:
                continue
            for hit in self.scan().find_needles(needles):
                found.setdefault(hit.kind, hit)
            if set(need) <= found.keys():
                break
        scan = self.last
        self.dut._log.info("reset-scrub control: %d values (%d bits) and %d memories read per scan, "
                           "%d needles (%d left out as in the clean design); found %s",
                           len(scan.values), scan.bits(), len(scan.memories), len(needles),
                           self.collisions, ", ".join(sorted(found)))
        missing = sorted(set(need) - found.keys())
        assert not missing, (
            f"positive control: before the reset the scan found no {', '.join(missing)} in the "
            f"live design (found: {', '.join(sorted(found))}; {self.last.bits()} bits read in "
            f"{len(self.last.values)} values, {len(self.last.memories)} memories): a scan that "
            f"finds nothing before the reset proves nothing after it")
        return found

    def assert_clean(self, secrets, what="after the reset", scan=None):
        """Fail, naming where, if any needle of *secrets* is in the design now (or in the
        earlier reading *scan*). Returns the :class:`Scan`."""
        if scan is None:
            scan = self.scan()
        self.last = scan
        hits = scan.find_needles(self.needles(secrets))
        if hits:
            where = {}
            for h in hits:
                where.setdefault(h.path, set()).add(f"{h.kind} ({h.order})")
            shown = "; ".join(f"{p}: {', '.join(sorted(k))}" for p, k in list(where.items())[:8])
            raise AssertionError(f"{what}: {len(where)} signals or memory words still hold words "
                                 f"of secrets: {shown}")
        return self.last


class Refusals:
    """Cycles of refused input after each reset: sampled in the ``ReadOnly`` phase of every
    cycle, a count starts in the first cycle with *rst* low after a cycle with it high and
    ends in the first cycle with *ready* high (that cycle not counted). *rst* is the reset,
    or an FLR strobe; *ready* the input port's ``ready``."""

    def __init__(self, clk, rst, ready, on_ready=None):
        self.clk, self.rst, self.ready = clk, rst, ready
        self.counts = []
        self.resets = 0         # resets seen (a count follows each)
        # called in the ReadOnly phase of the first cycle with ready high after a reset:
        # the moment the block says it is clean (e.g. ``lambda: scans.append(scanner.scan())``;
        # a later scan can miss a short flush that idle cycles finished meanwhile)
        self.on_ready = on_ready
        self._task = cocotb.start_soon(self._run())

    async def _run(self):
        armed, n = False, 0
        while True:
            await RisingEdge(self.clk)
            await ReadOnly()
            if int(self.rst.value):
                if not armed:
                    self.resets += 1
                armed, n = True, 0
            elif armed:
                if int(self.ready.value):
                    self.counts.append(n)
                    armed = False
                    if self.on_ready:
                        self.on_ready()
                else:
                    n += 1

    async def after_reset(self, timeout=1_000_000):
        """The count of the latest reset (waits until its input is ready)."""
        for _ in range(timeout):
            if self.resets and len(self.counts) == self.resets:
                return self.counts[-1]
            await RisingEdge(self.clk)
        raise AssertionError(f"{self.ready._path} did not rise within {timeout} cycles of the reset")

    def stop(self):
        self._task.cancel()

