"""``AES256``: a fully pipelined AES-256 forward cipher (docs/aes.md).

One round per pipeline stage, 14 stages: stage *r* registers the state after round *r*
(stage 1 also does the initial AddRoundKey). The key schedule runs beside the data, one
step ahead: the key register of stage *r* holds the 256-bit window ``w[4r .. 4r+7]``
(round keys *r* and *r+1*), so stage *r+1* takes its round key straight from a register
while it derives the next four key words. Every block thus carries its own key, a new key
is accepted every cycle, and no round key is stored anywhere else.

Longest paths of a stage: data = S-box (16 levels) + MixColumns (3) + AddRoundKey (1), in
stage 1 also the input gate and the first AddRoundKey; key = S-box + one XOR.

*lanes* = L encrypts L blocks per beat under the beat's one key: L data paths beside ONE
key schedule (the lanes of a beat share the key), so the area is about L data paths + 1
key path. Each stage's S-box layer stays one bit-sliced circuit over all 16·L state bytes
and the 4 key bytes: a wider layer adds no statements to the generated Verilog.
"""
from amaranth.hdl import Cat, Const, Module, Mux, Shape, Signal, Value
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from .layout import BLOCK_BITS, KEY_BITS, check_lanes, check_meta, input_layout, output_layout
from .sbox import sbox_layer

__all__ = ["AES256", "ROUNDS"]

ROUNDS = 14             # AES-256
WORD_BITS = 32          # a key-schedule word (four bytes)


def _wire(m, value, name):
    # A named net for a value read more than once. Amaranth lowers expressions as trees,
    # so a shared expression would be copied (and walked again) at every use.
    signal = Signal(len(value), name=name)
    m.d.comb += signal.eq(value)
    return signal


def _bytes(v):
    return [v[8 * k:8 * k + 8] for k in range(len(v) // 8)]


def _shift_rows(state):
    # The bytes of *state* after ShiftRows: byte 4c + r is row r of column c, and row r
    # moves left by r columns. A list of slices, not a Cat: see _wire.
    b = _bytes(state)
    return [b[4 * ((c + r) % 4) + r] for c in range(4) for r in range(4)]


def _xtime(b):
    # Multiplication by x in GF(2^8): shift left and fold x^8 = x^4 + x^3 + x + 1 (0x1b).
    return Cat(b[7], b[0] ^ b[7], b[1], b[2] ^ b[7], b[3] ^ b[7], b[4], b[5], b[6])


def _mix_columns(m, a, name):
    # On the 16 bytes *a*: out_i = 2 a_i + 3 a_(i+1) + a_(i+2) + a_(i+3)
    # = a_i + t + 2 (a_i + a_(i+1)), with t = a0 + a1 + a2 + a3 shared by a column.
    out = []
    for c in range(4):
        col = a[4 * c:4 * c + 4]
        t = _wire(m, (col[0] ^ col[1]) ^ (col[2] ^ col[3]), f"{name}_t{c}")
        d = [_wire(m, col[i] ^ col[(i + 1) % 4], f"{name}_d{4 * c + i}") for i in range(4)]
        out += [col[i] ^ t ^ _xtime(d[i]) for i in range(4)]
    return Cat(out)


def _next_words(m, window, sub_word, step, name):
    """The four key words that follow the 8-word *window* ``w[i-8 .. i-1]``, i = 8 + 4 step,
    given *sub_word* = SubWord(``w[i-1]``).

    Each new word is ``w[i+j] = (w[i-8] ^ .. ^ w[i-8+j]) ^ temp``: the prefix XORs of the
    old words are ready long before ``temp`` leaves its S-boxes, so the key path is S-box
    plus one XOR rather than a chain of four.
    """
    old = [window.word_select(j, WORD_BITS) for j in range(8)]
    if step % 2 == 0:   # i % 8 == 0: SubWord(RotWord(w[i-1])) ^ Rcon
        rcon = 1 << (step // 2)   # x^(i/8 - 1); at most 0x40 for AES-256, so no reduction
        # RotWord (byte 1 to byte 0, a right rotation in lane order) commutes with SubWord.
        temp = sub_word.rotate_right(8) ^ Const(rcon, WORD_BITS)
    else:               # i % 8 == 4: SubWord(w[i-1])
        temp = sub_word
    temp = _wire(m, temp, f"{name}_temp")
    w01 = _wire(m, old[0] ^ old[1], f"{name}_w01")
    prefix = [old[0], w01, w01 ^ old[2], w01 ^ (old[2] ^ old[3])]
    return Cat(p ^ temp for p in prefix)


class AES256(wiring.Component):
    """AES-256 encryption of one block per cycle, a new key with every block.

    Parameters
    ----------
    meta : shape-castable or None
        Sideband carried in order beside each block (``i.payload.meta`` to
        ``o.payload.meta``). ``None`` gives exactly the contract layouts.
    lanes : 1, 2 or 4
        Blocks per beat, all encrypted under the beat's key (1: the contract design).

    Attributes
    ----------
    i : In(stream.Signature({block: 128·lanes, key: 256[, meta]}))
    o : Out(stream.Signature({block: 128·lanes[, meta]}))
    latency : int
        Cycles from an accepted ``i`` transfer to its ``o.valid`` while ``o.ready`` stays
        high (14: one round per stage).
    flush_cycles : int
        Cycles ``i.ready`` stays low after reset (counted from the first cycle with ``rst``
        low) while zeros flush the pipeline: ``latency``, one per stage.

    The whole pipeline stalls when ``o`` holds a result that is not taken
    (``i.ready = ~o.valid | o.ready``). After reset ``i.ready`` stays low for ``latency``
    cycles: the pipeline is flushed with an all-zero block and key, so that no key, round
    key or state from before the reset survives in the (reset-less) data registers; each
    then holds the public intermediate of encrypting zero under the zero key. For the same
    reason a cycle without a transfer also feeds zeros, never the idle bus contents.
    """

    def __init__(self, meta=None, lanes=1, *, _formal_mutant=None):
        check_meta(meta)
        self.lanes = check_lanes(lanes)
        # test-only seeded bug for formal/aes.py (never set in a design): "short_scrub"
        # flushes one cycle too few after reset
        if _formal_mutant not in (None, "short_scrub"):
            raise ValueError(f"unknown _formal_mutant {_formal_mutant!r}")
        super().__init__({
            "i": In(stream.Signature(input_layout(meta, lanes))),
            "o": Out(stream.Signature(output_layout(meta, lanes))),
        })
        self.latency = ROUNDS
        self.flush_cycles = ROUNDS      # the post-reset flush: one zero bubble per stage
        width = BLOCK_BITS * lanes

        # Pipeline registers, stage r = 1 .. ROUNDS (list index r - 1). The wide ones are
        # reset-less: the post-reset flush scrubs them, which saves a gate per flop.
        self._valid = [Signal(name=f"s{r}_valid") for r in range(1, ROUNDS + 1)]
        self._state = [Signal(width, name=f"s{r}_state", reset_less=True)
                       for r in range(1, ROUNDS + 1)]
        # Stage r keeps w[4r .. 4r+7]: round key r + 1 and the words the next step expands
        # from; stage ROUNDS - 1 keeps only the last round key, the last stage none.
        self._key = [Signal(KEY_BITS if r < ROUNDS - 1 else BLOCK_BITS,
                            name=f"s{r}_key", reset_less=True) for r in range(1, ROUNDS)]
        # The sideband as plain bits (whatever its shape), so that bubbles zero it too.
        self._meta = [] if meta is None else [
            Signal(Shape.cast(meta).width, name=f"s{r}_meta", reset_less=True)
            for r in range(1, ROUNDS + 1)]
        # Cycles of post-reset flush still to run.
        scrub = self.flush_cycles - 1 if _formal_mutant == "short_scrub" else self.flush_cycles
        self._scrub = Signal(range(self.flush_cycles + 1), init=scrub)
        # `_scrub != 0`, registered: the flush gate feeds the first S-box layer, so it must
        # leave a flip-flop, not the counter's OR tree (25 gate levels at lanes 4 otherwise)
        self._flushing = Signal(init=scrub != 0)

    def elaborate(self, platform):
        m = Module()

        scrubbing = self._flushing
        with m.If(scrubbing):
            m.d.sync += [self._scrub.eq(self._scrub - 1), self._flushing.eq(self._scrub != 1)]

        # Global stall. During the flush o.valid is 0 (valid bits reset, and the flush
        # feeds bubbles), so every stage advances.
        advance = ~self.o.valid | self.o.ready
        m.d.comb += self.i.ready.eq(advance & ~scrubbing)

        # Stage 0: only an offered transfer enters; otherwise zeros (a bubble, or the flush).
        # The data gate is valid & ~scrubbing, not the transfer itself: when the stall holds
        # an offered input back, the stage registers do not load anyway, and so the stall
        # (which depends on o.ready through whatever sits after the pipeline) stays out of
        # the first round's S-box path.
        take = _wire(m, self.i.valid & self.i.ready, "take")
        enter = _wire(m, self.i.valid & ~scrubbing, "enter")
        window = _wire(m, Mux(enter, self.i.payload.key, 0), "s0_key")
        block = Mux(enter, self.i.payload.block, 0)
        lanes = self.lanes
        state = _wire(m, block ^ window[:BLOCK_BITS].replicate(lanes), "s0_state")  # AddRoundKey 0
        valid = take
        meta = Mux(enter, Value.cast(self.i.payload.meta), 0) if self._meta else None

        for r in range(1, ROUNDS + 1):
            idx = r - 1
            expand = r < ROUNDS   # this stage derives key words for a later one

            # One S-box layer per stage, bit-sliced over the 16·L state bytes and the 4
            # bytes of the key word the schedule substitutes. SubBytes commutes with ShiftRows,
            # so the S-boxes read the register and ShiftRows is applied to their output.
            layer = state
            if expand:
                layer = Cat(state, window.word_select(KEY_BITS // WORD_BITS - 1, WORD_BITS))
            sub = _wire(m, sbox_layer(m, layer, name=f"s{r}_sbox"), f"s{r}_sub")
            key_sub = sub[BLOCK_BITS * lanes:]

            # Data path, per lane: ShiftRows (wiring), MixColumns (not in the last round),
            # then AddRoundKey with round key r: the upper half of the window, or the whole
            # register of stage ROUNDS - 1.
            mixed = []
            for lane in range(lanes):
                shifted = _shift_rows(sub[BLOCK_BITS * lane:BLOCK_BITS * (lane + 1)])
                mixed.append(_mix_columns(m, shifted, f"s{r}_mix" + (f"{lane}" if lanes > 1 else ""))
                             if r < ROUNDS else Cat(shifted))
            next_state = Cat(*mixed) ^ window[-BLOCK_BITS:].replicate(lanes)

            # Key path: round key r + 1 is already in the window; derive the four words
            # after it, and drop what no later stage reads.
            if expand:
                words = _next_words(m, window, key_sub, idx, f"s{r}_ks")
                next_window = Cat(window[BLOCK_BITS:], words) if r < ROUNDS - 1 else words

            with m.If(advance):
                m.d.sync += [
                    self._valid[idx].eq(valid),
                    self._state[idx].eq(next_state),
                ]
                if expand:
                    m.d.sync += self._key[idx].eq(next_window)
                if self._meta:
                    m.d.sync += self._meta[idx].eq(meta)

            valid, state = self._valid[idx], self._state[idx]
            if expand:
                window = self._key[idx]
            if self._meta:
                meta = self._meta[idx]

        m.d.comb += [
            self.o.valid.eq(valid),
            self.o.payload.block.eq(state),
        ]
        if self._meta:
            m.d.comb += Value.cast(self.o.payload.meta).eq(meta)
        return m
