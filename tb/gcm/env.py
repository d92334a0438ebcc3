"""The ``gcm_core`` test environment (tb/gcm/test_gcm.py runs the tests, bench_gcm.py
borrows the frame helpers). :data:`LANES` comes from the design being simulated
(``gcm_core``: 1, ``gcm_core_x4``: 4).

:class:`GcmTB` is the scoreboard: a monitor feeds the model (:class:`sw.gcm.model.GcmCoreModel`)
every ``key`` and ``i`` transfer in the order the core accepts them, and each ``o`` transfer
must equal the model's answer for the oldest unanswered beat. The frame helpers build feed
items and read whole frames back out of the results, and :func:`check_openssl` checks them
against OpenSSL, which does not depend on the model at all.
"""
import os
import random
from collections import deque

import cocotb
from cocotb.triggers import ReadOnly, RisingEdge
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from hw.gcm import GcmCore
from hw.gcm.layout import Op, input_layout, key_layout, output_layout
from sw.gcm.model import GcmCoreModel, frame_beats, split_beat
from sw.gcm.vectors import blocks_of, le
from tb.common.payload import pack, unpack
from tb.common.sim import params
from tb.common.stream import StreamSink, StreamSource, never, random_pause
from tb.common.tb import TB

from .cover import GcmCoverage

__all__ = ["GcmTB", "CONTEXTS", "LANES", "MAX_FRAME_BLOCKS", "FLUSH", "LATENCY", "KEY_LAYOUT", "IN_LAYOUT",
           "OUT_LAYOUT", "ZERO_ERR", "fmt", "legal_lengths", "frame_items", "frame_outputs", "nop_items",
           "random_traffic", "check_openssl"]

CONTEXTS = 16
LANES = params(os.environ.get("COCOTB_TOPLEVEL", "gcm_core")).get("lanes", 1)
MAX_FRAME_BLOCKS = 64          # IV + data + tag: 1 KiB
FLUSH = GcmCore(CONTEXTS, LANES).flush_cycles   # input refused after reset (the RTL's own)
LATENCY = GcmCore(CONTEXTS, LANES).latency
KEY_LAYOUT, IN_LAYOUT, OUT_LAYOUT = key_layout(), input_layout(LANES), output_layout(LANES)
ZERO_ERR = (1, 0, 0)       # (err, block, tag_ok) of a misused beat: the whole beat zero


class GcmTB(TB):
    """Drivers of ``key`` and ``i``, the sink of ``o`` and the model scoreboard."""

    def __init__(self, dut, idle=0.0, stall=0.0):
        super().__init__(dut)
        assert len(dut.i__payload.value) == IN_LAYOUT.size, "LANES does not match the design"
        self.key_src = StreamSource(dut, "key", self.clk)
        self.i_src = StreamSource(dut, "i", self.clk)
        self.sink = StreamSink(dut, "o", self.clk)
        for src in (self.key_src, self.i_src):
            src.set_pause(random_pause(idle) if idle else never())
        self.sink.set_pause(random_pause(stall) if stall else never())
        self.model = GcmCoreModel(CONTEXTS, LANES)
        self.expected = deque()    # (model answer, label) per accepted op, in order
        self.labels = deque()      # label of every op sent, in send order
        self.results = []          # (label, o payload dict) of every checked output
        self.errors = []
        self.cover = GcmCoverage()     # functional cover points (tb/gcm/cover.py)
        cocotb.start_soon(self._monitor())
        cocotb.start_soon(self._check())

    async def _monitor(self):
        dut = self.dut
        while True:
            await RisingEdge(self.clk)
            await ReadOnly()
            if int(dut.rst.value):
                continue
            key_fire = int(dut.key__valid.value) and int(dut.key__ready.value)
            i_fire = int(dut.i__valid.value) and int(dut.i__ready.value)
            if key_fire and i_fire:
                self.errors.append("key and i transfers in the same cycle")
            if key_fire:
                k = unpack(KEY_LAYOUT, dut.key__payload.value)
                self.model.install_key(k["ctx"], k["key"])
                self.cover.key(k["ctx"])
            if i_fire:
                op = unpack(IN_LAYOUT, dut.i__payload.value)
                self.cover.beat(self.model, op["ctx"], op["op"], op["block"], LANES)
                answer = self.model.step(op["block"], op["ctx"], op["op"], op["decrypt"])
                label = self.labels.popleft() if self.labels else None
                self.expected.append((answer, op, label))

    async def _check(self):
        while True:
            raw = await self.sink.recv(timeout_cycles=1 << 30)
            got = unpack(OUT_LAYOUT, raw)
            if not self.expected:
                self.errors.append(f"output with no op outstanding: {got}")
                continue
            (block, tag_ok, err), op, label = self.expected.popleft()
            want = {"block": block, "ctx": op["ctx"], "op": op["op"], "tag_ok": tag_ok, "err": err}
            if got != want:
                self.errors.append(f"op {label}: RTL {fmt(got)} != model {fmt(want)} for input {fmt(op)}")
            self.results.append((label, got))

    def install(self, ctx, key: bytes):
        self.key_src.send(pack(KEY_LAYOUT, ctx=ctx, key=le(key)))

    def op(self, ctx, op, block=0, decrypt=0, label=None):
        self.labels.append(label)
        self.i_src.send(pack(IN_LAYOUT, block=block, ctx=ctx, op=op, decrypt=decrypt))

    async def feed(self, items):
        """Send ("key", ctx, key) and ("op", ctx, op, block, decrypt, label) items so that
        they are accepted in list order: a key install waits until every earlier op is
        taken and an op until every earlier install is taken."""
        for item in items:
            if item[0] == "key":
                while not self.i_src.empty():
                    await RisingEdge(self.clk)
                self.install(*item[1:])
            else:
                while not self.key_src.empty():
                    await RisingEdge(self.clk)
                self.op(*item[1:])

    async def drain(self, timeout=200_000):
        for _ in range(timeout):
            if self.key_src.empty() and self.i_src.empty() and not self.expected and not self.labels:
                break
            await RisingEdge(self.clk)
        else:
            raise AssertionError(f"not drained: {len(self.expected)} ops unanswered")
        assert not self.errors, f"{len(self.errors)} mismatches, first: " + "; ".join(self.errors[:3])

    async def run(self, items):
        await self.feed(items)
        await self.drain()

    async def reset(self, cycles=2):
        await super().reset(cycles)
        self.model.reset()
        self.cover.reset()


def fmt(d):
    """A payload dict for messages: big numbers in hex, enums by name."""
    return {k: (f"{v:#x}" if isinstance(v, int) and v > 9 else getattr(v, "name", v)) for k, v in d.items()}


def legal_lengths(max_blocks=MAX_FRAME_BLOCKS - 2):
    """Data-block counts of the frames a core of LANES lanes takes (whole beats, >= 2)."""
    return [n for n in range(max_blocks + 1) if (n + 2) % LANES == 0 and n + 2 >= 2 * LANES]


def frame_items(ctx, nonce: bytes, blocks, decrypt, mac=0, label=None):
    """The beats of one frame as feed items labelled (label, op name, beat number)."""
    return [("op", ctx, op, beat, decrypt, (label, op.name, n))
            for n, (op, beat) in enumerate(frame_beats(nonce, blocks, LANES, mac))]


def frame_outputs(tb, label):
    """(data blocks, tag, tag_ok, errs) that the RTL produced for frame *label*."""
    outs = [got for lab, got in tb.results if lab and lab[0] == label]
    blocks = [b for got in outs for b in split_beat(got["block"], LANES)]
    mac = [got for lab, got in tb.results if lab and lab[0] == label and lab[1] == "MAC"][0]
    errs = sum(got["err"] for got in outs)
    return blocks[1:-1], blocks[-1], mac["tag_ok"], errs


def nop_items(count):
    """NOP beats on any ctx (keyed or not), random payload and decrypt bit."""
    return [("op", random.randrange(16), Op.NOP, random.getrandbits(128 * LANES),
             random.getrandbits(1), ("nop", n)) for n in range(count)]


def random_traffic(frames_per_ctx, max_blocks=MAX_FRAME_BLOCKS - 2, forge=0.2, rekey=0.3):
    """Frames on all contexts: random keys, nonces, every legal length up to max_blocks
    data blocks, encrypt and decrypt (decrypt frames sealed by OpenSSL, some with a forged
    tag), key reinstalls between frames. Returns (per-context item lists, frames)."""
    lists, frames, lengths = [], [], legal_lengths(max_blocks)
    for ctx in range(CONTEXTS):
        key = random.randbytes(32)
        items = [("key", ctx, key)]
        for f in range(frames_per_ctx):
            if f and random.random() < rekey:
                key = random.randbytes(32)
                items.append(("key", ctx, key))
            nonce = random.randbytes(12)
            pt = random.randbytes(16 * random.choice(lengths))
            decrypt = random.random() < 0.5
            label = ("frame", ctx, f)
            if decrypt:
                sealed = AESGCM(key).encrypt(nonce, pt, None)
                ct, tag = sealed[:-16], sealed[-16:]
                forged = random.random() < forge
                if forged:
                    bit = random.randrange(128)
                    tag = (le(tag) ^ (1 << bit)).to_bytes(16, "little")
                items += frame_items(ctx, nonce, blocks_of(ct), 1, le(tag), label)
                frames.append((label, key, nonce, pt, True, forged))
            else:
                items += frame_items(ctx, nonce, blocks_of(pt), 0, 0, label)
                frames.append((label, key, nonce, pt, False, False))
        lists.append(items)
    return lists, frames


def check_openssl(tb, frames):
    """Frames the RTL sealed open in OpenSSL; OpenSSL's frames opened in the RTL."""
    for label, key, nonce, pt, decrypt, forged in frames:
        data, tag, tag_ok, errs = frame_outputs(tb, label)
        assert errs == 0, f"{label}: err set on a legal frame"
        if decrypt:
            assert data == blocks_of(pt), f"{label}: RTL decryption differs from the plaintext"
            assert tag_ok == (not forged), f"{label}: tag_ok={tag_ok} for a {'forged' if forged else 'genuine'} tag"
        else:
            sealed = b"".join(b.to_bytes(16, "little") for b in data) + tag.to_bytes(16, "little")
            assert AESGCM(key).decrypt(nonce, sealed, None) == pt, f"{label}: OpenSSL rejects the RTL frame"


async def _keyed(tb, ctxs=range(CONTEXTS)):
    """A random key installed on every context of *ctxs*, and taken."""
    await tb.run([("key", c, random.randbytes(32)) for c in ctxs])

