"""cocotb regression of ``gcm_core`` (hw/gcm): the RTL against the golden model
(sw/gcm/model.py) on every beat, and against OpenSSL (``cryptography``'s AESGCM) and the
NIST CAVP files for whole frames. The same tests run on ``gcm_core`` (lanes 1) and
``gcm_core_x4`` (lanes 4): :data:`LANES` comes from the design being simulated.

The scoreboard (tb/gcm/env.py): a monitor feeds the model every ``key`` and ``i`` transfer
in the order the core accepts them, and each ``o`` transfer must equal the model's answer
for the oldest unanswered beat. Frame-level checks (ciphertext and tag decrypt in OpenSSL,
OpenSSL's frames decrypt with ``tag_ok``, CAVP answers) do not depend on the model at all.
"""
import random

import cocotb
import pytest
from cocotb.triggers import ReadOnly, RisingEdge
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from hw.gcm.layout import Op
from sw.gcm.model import j0_block
from sw.gcm.vectors import blocks_of, cavp_cases, le
from tb.common.scrub import Refusals, Scanner, gcm_frame_secrets, gcm_key_secrets
from tb.common.stream import TransferLog, interleave
from tb.gcm.env import (
    CONTEXTS,
    FLUSH,
    LANES,
    LATENCY,
    ZERO_ERR,
    GcmTB,
    _keyed,
    check_openssl,
    fmt,
    frame_items,
    frame_outputs,
    legal_lengths,
    nop_items,
    random_traffic,
)


@cocotb.test(skip=LANES == 4)
async def cavp_vectors(dut):
    """Every CAVP case that fits the engine (96-bit IV, empty AAD, 128-bit tag, non-empty
    block-aligned text, whole beats), encrypt and decrypt, FAIL cases included, checked
    against the file. (The CAVP texts that fit are 1 or 2 blocks: no whole frame of 4-block
    beats, so lanes 4 skips this; OpenSSL covers it.)"""
    tb = GcmTB(dut)
    await tb.reset()
    items, cases = [], []
    for fname, decrypt in (("gcmEncryptExtIV256.rsp", 0), ("gcmDecrypt256.rsp", 1)):
        for n, rec in enumerate(cavp_cases(fname)):
            ctx = len(cases) % CONTEXTS
            key, nonce = bytes.fromhex(rec["KEY"]), bytes.fromhex(rec["IV"])
            pt, ct = blocks_of(bytes.fromhex(rec.get("PT", ""))), blocks_of(bytes.fromhex(rec["CT"]))
            tag = le(bytes.fromhex(rec["TAG"]))
            label = (fname, n)
            if (len(pt) + 2) % LANES:
                continue
            items += [("key", ctx, key)]
            items += frame_items(ctx, nonce, ct if decrypt else pt, decrypt, tag if decrypt else 0, label)
            cases.append((label, decrypt, pt, ct, tag, bool(rec.get("FAIL"))))
    await tb.run(items)
    fails = 0
    for label, decrypt, pt, ct, tag, fail in cases:
        data, tag_out, tag_ok, errs = frame_outputs(tb, label)
        assert errs == 0, f"{label}: err set"
        if not decrypt:
            assert data == ct and tag_out == tag and not tag_ok, f"{label}: ciphertext or tag differs from CAVP"
        elif fail:
            fails += 1
            assert not tag_ok, f"{label}: CAVP FAIL case accepted"
        else:
            assert tag_ok and data == pt, f"{label}: plaintext differs or tag rejected"
    assert len(cases) > 20 // LANES and fails > 0, f"only {len(cases)} CAVP cases, {fails} FAIL"
    tb.log.info("CAVP: %d cases through the RTL, %d FAIL cases rejected", len(cases), fails)


@cocotb.test()
@cocotb.parametrize(idle=[0.0, 0.3], stall=[0.0, 0.4])
async def random_interleaved(dut, idle, stall):
    """All 16 contexts interleaved beat by beat, frames of every legal length up to 1 KiB,
    encrypt and decrypt, forged tags, key reinstalls, NOP beats mixed in, with idle cycles
    and back-pressure."""
    tb = GcmTB(dut, idle, stall)
    await tb.reset()
    lists, frames = random_traffic(frames_per_ctx=(4 if (idle or stall) else 6) // (LANES // 2 or 1))
    await tb.run(interleave(lists + [nop_items(40)]))
    check_openssl(tb, frames)


@cocotb.test()
async def every_frame_length(dut):
    """One frame of every legal length (IV + data + tag up to 64 blocks), encrypt and
    decrypt, spread over the 16 contexts and interleaved."""
    tb = GcmTB(dut)
    await tb.reset()
    lists, frames = [[] for _ in range(CONTEXTS)], []
    keys = [random.randbytes(32) for _ in range(CONTEXTS)]
    items = [("key", c, keys[c]) for c in range(CONTEXTS)]
    for n, length in enumerate(legal_lengths()):
        for decrypt in (0, 1):
            ctx, nonce = (2 * n + decrypt) % CONTEXTS, random.randbytes(12)
            pt, label = random.randbytes(16 * length), ("len", length, decrypt)
            if decrypt:
                sealed = AESGCM(keys[ctx]).encrypt(nonce, pt, None)
                lists[ctx] += frame_items(ctx, nonce, blocks_of(sealed[:-16]), 1, le(sealed[-16:]), label)
            else:
                lists[ctx] += frame_items(ctx, nonce, blocks_of(pt), 0, 0, label)
            frames.append((label, keys[ctx], nonce, pt, bool(decrypt), False))
    await tb.run(items + interleave(lists))
    check_openssl(tb, frames)


@cocotb.test()
async def nop_passes_through(dut):
    """NOP beats (op code 3) on every ctx, keyed or not, between the beats of open frames:
    the beat comes out unchanged, in order, err = tag_ok = 0, and the frames around them
    are not disturbed."""
    tb = GcmTB(dut, idle=0.2, stall=0.2)
    await tb.reset()
    lists, frames = random_traffic(frames_per_ctx=1, max_blocks=4 * LANES + 2, rekey=0)
    lists = [lst for c, lst in enumerate(lists) if c % 2 == 0]     # odd contexts have no key
    frames = [f for f in frames if f[0][1] % 2 == 0]
    nops = nop_items(80)
    await tb.run(interleave(lists + [nops]))
    got = {lab: g for lab, g in tb.results if lab and lab[0] == "nop"}
    for _, ctx, _, beat, _, lab in nops:
        g = got[lab]
        assert (g["block"], g["ctx"], g["op"], g["err"], g["tag_ok"]) == (beat, ctx, Op.NOP, 0, 0), \
            f"{lab}: {fmt(g)}"
    check_openssl(tb, frames)


@cocotb.test()
async def fixed_latency(dut):
    """With ``o`` always ready, every beat leaves exactly ``GcmCore.latency`` cycles after
    it entered (the cycle of its ``i`` transfer to the cycle of its ``o`` transfer), one per
    cycle, in order: IV, DATA and MAC beats of keyed contexts and NOPs alike (a functional
    property the docs state, not a timing benchmark)."""
    tb = GcmTB(dut)
    await tb.reset()
    await _keyed(tb, range(4))
    log = TransferLog(dut, tb.clk, "i", "o")
    await RisingEdge(tb.clk)    # the log waits on the next edge before anything is sent
    entered, left = log.cycles["i"], log.cycles["o"]
    lists, frames = random_traffic(frames_per_ctx=2, max_blocks=4 * LANES + 2, rekey=0)
    ops = [it for lst in lists[:4] for it in lst if it[0] == "op"] + nop_items(16)
    await tb.run(ops)
    log.stop()
    assert len(entered) == len(left) == len(ops), (len(entered), len(left), len(ops))
    latencies = sorted({b - a for a, b in zip(entered, left)})
    assert latencies == [LATENCY], f"latencies {latencies} differ from GcmCore.latency = {LATENCY}"
    assert entered == list(range(entered[0], entered[0] + len(ops))), "i did not take one beat per cycle"


@cocotb.test()
async def back_to_back_same_context(dut):
    """One context sends whole frames back to back, then frames of two contexts alternate
    every cycle: no bubble is needed at a frame boundary or a context switch."""
    tb = GcmTB(dut)
    await tb.reset()
    lists, frames = random_traffic(frames_per_ctx=3, max_blocks=8, rekey=0)
    ops = [[it for it in lst if it[0] == "op"] for lst in lists[:3]]
    items = [it for lst in lists[:3] for it in lst if it[0] == "key"]
    items += ops[0]                                   # one context, frames back to back
    alternate = [it for pair in zip(ops[1], ops[2]) for it in pair]
    n = len(alternate) // 2
    items += alternate + ops[1][n:] + ops[2][n:]      # two contexts, switching every op
    await tb.run(items)
    check_openssl(tb, [f for f in frames if f[0][1] in (0, 1, 2)])


@cocotb.test()
async def two_contexts_interleaved(dut):
    """Frames of contexts 0 and 1 only, alternating beat by beat, checked against OpenSSL:
    passes on any design size, and is the short recording ``make mutate`` replays on
    ``GcmCore(contexts=2)``, the size of the formal reference harness (scripts/mutate_sim.py)."""
    tb = GcmTB(dut)
    await tb.reset()
    lists, frames = random_traffic(frames_per_ctx=8, max_blocks=4 * LANES, rekey=0)
    items = [it for lst in lists[:2] for it in lst if it[0] == "key"]
    ops = [[it for it in lst if it[0] == "op"] for lst in lists[:2]]
    n = min(map(len, ops))
    items += [it for pair in zip(ops[0], ops[1]) for it in pair] + ops[0][n:] + ops[1][n:]
    await tb.run(items)
    check_openssl(tb, [f for f in frames if f[0][1] in (0, 1)])


# (here, not in env.py: nop_passes_through's loop variable has the same name)
def beat(lane0):
    """A beat with *lane0* in lane 0 and random blocks in the other lanes."""
    return lane0 | random.getrandbits(128 * (LANES - 1)) << 128


@cocotb.test()
async def misuse_data_and_mac_on_idle(dut):
    """DATA or MAC on an idle (keyed) context: err, block 0."""
    tb = GcmTB(dut)
    await tb.reset()
    await _keyed(tb, [3])
    await tb.run([("op", 3, Op.DATA, beat(random.getrandbits(128)), 0, "d"),
                  ("op", 3, Op.MAC, beat(0), 1, "m")])
    assert [(g["err"], g["block"], g["tag_ok"]) for _, g in tb.results] == [ZERO_ERR] * 2


@cocotb.test()
async def misuse_no_key(dut):
    """Every op on a context that never had a key: err, block 0."""
    tb = GcmTB(dut)
    await tb.reset()
    iv = beat(j0_block(random.randbytes(12)))
    await tb.run([("op", c, op, iv, 0, (c, op)) for c in range(CONTEXTS)
                  for op in (Op.IV, Op.DATA, Op.MAC)])
    assert all(g["err"] == 1 and g["block"] == 0 for _, g in tb.results) and len(tb.results) == 3 * CONTEXTS


@cocotb.test()
async def misuse_bad_iv_tail(dut):
    """An IV whose bytes 12..15 are not 00 00 00 01: err, block 0, context stays idle."""
    tb = GcmTB(dut)
    await tb.reset()
    await _keyed(tb, [7])
    nonce = le(random.randbytes(12))
    for tail in (0x00000000, 0x02000000, 0x01000001, 0xFFFFFFFF, 0x00000001):
        await tb.run([("op", 7, Op.IV, beat(nonce | tail << 96), 0, tail),
                      ("op", 7, Op.DATA, beat(5), 0, "d")])
    assert all(g["err"] == 1 and g["block"] == 0 for _, g in tb.results)


@cocotb.test()
async def misuse_iv_on_active(dut):
    """IV on an active context: err, block 0, and the abandoned frame can never produce a
    tag (DATA and MAC after it err)."""
    tb = GcmTB(dut)
    await tb.reset()
    await _keyed(tb, [2])
    n1, n2 = random.randbytes(12), random.randbytes(12)
    await tb.run([("op", 2, Op.IV, beat(j0_block(n1)), 0, "iv1"), ("op", 2, Op.DATA, beat(1), 0, "d1"),
                  ("op", 2, Op.IV, beat(j0_block(n2)), 0, "iv2"), ("op", 2, Op.DATA, beat(2), 0, "d2"),
                  ("op", 2, Op.MAC, beat(0), 0, "m")])
    got = {lab: g for lab, g in tb.results}
    assert got["iv1"]["err"] == 0 and got["d1"]["err"] == 0
    for lab in ("iv2", "d2", "m"):
        assert got[lab]["err"] == 1 and got[lab]["block"] == 0, f"{lab}: {got[lab]}"


@cocotb.test()
async def key_install_abandons_frame(dut):
    """A key install on a context with an open frame leaves it idle; the other contexts'
    frames in flight are not disturbed, and ops after the install see the new key."""
    tb = GcmTB(dut)
    await tb.reset()
    lists, frames = random_traffic(frames_per_ctx=1, max_blocks=4 * LANES, rekey=0)
    items = [it for lst in lists for it in lst if it[0] == "key"]
    ops = interleave([[it for it in lst if it[0] == "op"] for lst in lists])
    new_key = random.randbytes(32)
    # the victim has an open frame at the cut: its IV went before, an op of it comes after
    # (every frame ends with a MAC, so a cut right after any IV always has one)
    for cut in (len(ops) // 2, 1 + next(i for i, it in enumerate(ops) if it[2] is Op.IV)):
        opened = {it[1] for it in ops[:cut] if it[2] is Op.IV}
        victim = next((it[1] for it in ops[cut:] if it[2] is not Op.IV and it[1] in opened), None)
        if victim is not None:
            break
    items += ops[:cut] + [("key", victim, new_key)] + ops[cut:]
    await tb.run(items)
    victim_label = ("frame", victim, 0)
    tail = [g for lab, g in tb.results if lab and lab[0] == victim_label and g["err"]]
    assert tail, "ops of the abandoned frame did not err after the key install"
    check_openssl(tb, [f for f in frames if f[0][1] != victim])
    # and the new key is in use: a fresh frame under it opens in OpenSSL
    tb.results.clear()
    nonce, pt = random.randbytes(12), random.randbytes(16 * legal_lengths()[1])
    await tb.run(frame_items(victim, nonce, blocks_of(pt), 0, 0, "new"))
    check_openssl(tb, [("new", new_key, nonce, pt, False, False)])


@cocotb.test()
async def key_install_right_before_mac(dut):
    """A key install between a frame's DATA and its MAC abandons the frame: the MAC right
    after the install errs (block 0, no tag), as a DATA there does; the IV after it opens a
    new frame. (The functional bin gcm_op.op_x_switch "MAC × after_key".)"""
    tb = GcmTB(dut)
    await tb.reset()
    await _keyed(tb, [5])
    for op in (Op.MAC, Op.DATA):
        await tb.run([("op", 5, Op.IV, beat(j0_block(random.randbytes(12))), 0, ("iv", op.name)),
                      ("op", 5, Op.DATA, beat(random.getrandbits(128)), 0, ("data", op.name)),
                      ("key", 5, random.randbytes(32)),
                      ("op", 5, op, beat(random.getrandbits(128)), 1, ("after_key", op.name))])
    got = {lab: (g["err"], g["block"], g["tag_ok"]) for lab, g in tb.results}
    assert len(got) == 6, f"expected 6 answers, got {len(got)}"
    for op in ("MAC", "DATA"):
        assert got[("iv", op)][0] == 0 and got[("data", op)][0] == 0, f"the frame before the install erred: {got}"
        assert got[("after_key", op)] == ZERO_ERR, f"{op} right after a key install: {got[('after_key', op)]}, " \
            f"expected err with a zero beat {ZERO_ERR}"


@cocotb.test()
async def reset_mid_traffic(dut):
    """Reset with frames in flight on every context: input is refused for exactly
    ``GcmCore.flush_cycles`` cycles after each reset, no output from before the reset comes
    out after it, and no signal or memory word keeps a word of a key, of its expanded round
    keys, of H..H^LANES, of E_K(J0) or of a GHASH partial hash of any frame sent (before
    the reset, as a control, the same scan finds every one of those kinds in the live
    design); every context answers err until it gets a new key, and traffic after new
    keys is correct. The scan reads the design in the first cycle the input is ready again
    (idle cycles feed the AES zeros too, and would finish a flush cut short unseen)."""
    tb = GcmTB(dut, idle=0.2, stall=0.3)
    refusals = Refusals(tb.clk, dut.rst, dut.i__ready)
    await tb.reset()
    got = await refusals.after_reset()
    assert got == FLUSH, f"input refused for {got} cycles after the first reset, not flush_cycles = {FLUSH}"
    scanner = Scanner(dut, skip=("i__", "key__"))
    await ReadOnly()
    scanner.baseline()                  # after the flush, before any key: the clean design
    await RisingEdge(tb.clk)
    scans = []                          # read in the first cycle the input is ready again
    refusals.on_ready = lambda: scans.append(scanner.scan())
    # as many beats in flight at every lanes (a lanes-4 beat carries 4 blocks)
    lists, frames = random_traffic(frames_per_ctx=2 * LANES, max_blocks=20, rekey=0)
    keys = [it[2] for lst in lists for it in lst if it[0] == "key"]
    secrets = [s for k in keys for s in gcm_key_secrets(k, LANES)]
    for label, key, nonce, pt, _, _ in frames:      # X over the ciphertext either way
        secrets += gcm_frame_secrets(key, nonce, blocks_of(pt), False, label=str(label))
    need = {s.kind for s in secrets}
    feeder = cocotb.start_soon(tb.feed(interleave(lists + [nop_items(20)])))
    await scanner.control(secrets, tb.clk, 600, need)
    for _ in range(random.randint(100, 250)):       # more contexts keyed, frames open
        await RisingEdge(tb.clk)
    assert not tb.errors, tb.errors[:3]
    assert tb.i_src.queue and tb.expected, "every frame was done before the reset"
    feeder.cancel()
    tb.key_src.clear()
    tb.i_src.clear()
    tb.labels.clear()
    await tb.reset()
    # what was in flight is gone: nothing may come out from here on
    tb.expected.clear()
    tb.sink.clear()
    tb.errors.clear()
    got = await refusals.after_reset()
    assert got == FLUSH, f"input refused for {got} cycles after the reset, not flush_cycles = {FLUSH}"
    for _ in range(40):
        await RisingEdge(tb.clk)
    assert not tb.errors and not tb.sink.queue, f"output after reset: {tb.errors[:2]}"
    scanner.assert_clean(secrets, "when the input was ready after the reset", scans[-1])
    tb.results.clear()
    tb.errors.clear()
    iv = j0_block(random.randbytes(12))
    await tb.run([("op", c, Op.IV, beat(iv), 0, c) for c in range(CONTEXTS)])
    assert all(g["err"] == 1 for _, g in tb.results), "a context worked after reset without a key"
    tb.results.clear()
    lists, frames = random_traffic(frames_per_ctx=1, max_blocks=6, rekey=0)
    await tb.run(interleave(lists))
    check_openssl(tb, frames)


@pytest.mark.parametrize("design", ["gcm_core", "gcm_core_x4"])
def test_gcm_core(design):
    """pytest entry: the cocotb regression of gcm_core (lanes 1) and gcm_core_x4 (lanes 4)
    on Verilator."""
    from tb.common.sim import run

    run(design, "tb.gcm.test_gcm")
