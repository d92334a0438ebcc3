"""Golden model of ``gcm_core`` against independent references: ``cryptography``'s AESGCM
(OpenSSL) and the NIST CAVP GCM vectors. Expected values never come from the model."""
import os
import random

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from hw.gcm.layout import Op, input_layout, key_layout, output_layout
from sw.gcm.model import GcmCoreModel, gf128_mul, j0_block
from sw.gcm.vectors import blocks_of, cavp_cases, le

SEED = int(os.environ.get("SEED") or "20240613")


def reference(key, nonce, pt):
    """(ciphertext blocks, tag) from OpenSSL via cryptography, as bus-lane ints."""
    out = AESGCM(key).encrypt(nonce, pt, None)
    return blocks_of(out[:-16]), le(out[-16:])


def frame_ops(ctx, nonce, blocks, decrypt, mac=0):
    """The (block, ctx, op, decrypt) ops of one frame: IV, DATA..., MAC."""
    ops = [(j0_block(nonce), ctx, Op.IV, decrypt)]
    ops += [(b, ctx, Op.DATA, decrypt) for b in blocks]
    ops.append((mac, ctx, Op.MAC, decrypt))
    return ops


def run_frame(model, ctx, nonce, blocks, decrypt, mac=0):
    return [model.step(*op) for op in frame_ops(ctx, nonce, blocks, decrypt, mac)]


def check_frame(results, nonce, expect_blocks, expect_tag, tag_ok):
    iv_out, *data_out, mac_out = results
    assert iv_out == (j0_block(nonce), 0, 0)
    assert [r[0] for r in data_out] == expect_blocks
    assert all(r[1:] == (0, 0) for r in data_out)
    assert mac_out == (expect_tag, int(tag_ok), 0)


# --- layouts --------------------------------------------------------------------------

def test_layout_widths_and_order():
    assert key_layout().size == 4 + 256 and input_layout.size == 128 + 4 + 2 + 1
    assert output_layout.size == 128 + 4 + 2 + 1 + 1
    assert [(n, f.offset) for n, f in input_layout] == \
        [("block", 0), ("ctx", 128), ("op", 132), ("decrypt", 134)]
    assert [(n, f.offset) for n, f in output_layout] == \
        [("block", 0), ("ctx", 128), ("op", 132), ("tag_ok", 134), ("err", 135)]
    assert [(n, f.offset) for n, f in key_layout()] == [("ctx", 0), ("key", 4)]
    assert (Op.IV.value, Op.DATA.value, Op.MAC.value) == (0, 1, 2)


@pytest.mark.parametrize("bad", [0, 17, -1, 2.0, True])
def test_contexts_out_of_range(bad):
    with pytest.raises(ValueError):
        GcmCoreModel(contexts=bad)
    with pytest.raises(ValueError):
        key_layout(bad)


def test_gf128_mul_known_answer():
    # McGrew & Viega, GCM spec test case 2: X1 = C1 . H
    h = 0x66e94bd4ef8a2c3b884cfa59ca342b2e
    c = 0x0388dace60b6a392f328c2b971b2fe78
    assert gf128_mul(c, h) == 0x5e2ec746917062882c85b0685353deb7
    assert gf128_mul(h, c) == 0x5e2ec746917062882c85b0685353deb7
    assert gf128_mul(c, 1 << 127) == c        # 1 is the bit-reflected unit


# --- against OpenSSL ------------------------------------------------------------------

def test_random_interleaved_frames_vs_aesgcm():
    rng = random.Random(SEED)
    model = GcmCoreModel(16)
    keys = {}
    for ctx in rng.sample(range(16), 6):
        keys[ctx] = rng.randbytes(32)
        model.install_key(ctx, le(keys[ctx]))
    frames = checked = 0
    for _round in range(4):
        # one frame open on each keyed context, their ops interleaved at random
        pending = {}
        for ctx, key in keys.items():
            nonce, n = rng.randbytes(12), rng.randint(1, 62)
            decrypt, forged = rng.random() < 0.5, rng.random() < 0.25
            pt = rng.randbytes(16 * n)
            ct, tag = reference(key, nonce, pt)
            if decrypt:
                mac = tag ^ (1 << rng.randrange(128)) if forged else tag
                ops, want = frame_ops(ctx, nonce, ct, 1, mac), blocks_of(pt)
            else:
                ops, want = frame_ops(ctx, nonce, blocks_of(pt), 0, rng.getrandbits(128)), ct
                forged = True          # an encryption never reports tag_ok
            pending[ctx] = [ops, [], (nonce, want, tag, not forged)]
        while pending:
            ctx = rng.choice(list(pending))
            ops, results, expect = pending[ctx]
            results.append(model.step(*ops[len(results)]))
            if len(results) == len(ops):
                check_frame(results, *expect)
                del pending[ctx]
                frames += 1
                checked += len(ops)
    print(f"{frames} frames, {checked} ops checked against AESGCM")
    assert frames == 24


def test_same_context_many_frames_and_rekey():
    rng = random.Random(SEED + 1)
    model = GcmCoreModel(16)
    for _ in range(6):
        key = rng.randbytes(32)
        model.install_key(5, le(key))
        for _ in range(3):
            nonce, pt = rng.randbytes(12), rng.randbytes(16 * rng.randint(1, 8))
            ct, tag = reference(key, nonce, pt)
            check_frame(run_frame(model, 5, nonce, blocks_of(pt), 0), nonce, ct, tag, False)
            check_frame(run_frame(model, 5, nonce, ct, 1, tag), nonce, blocks_of(pt), tag, True)


# --- NIST CAVP ------------------------------------------------------------------------

def test_cavp_encrypt():
    model, used = GcmCoreModel(16), 0
    for i, rec in enumerate(cavp_cases("gcmEncryptExtIV256.rsp")):
        ctx = i % 16
        model.install_key(ctx, le(bytes.fromhex(rec["KEY"])))
        nonce = bytes.fromhex(rec["IV"])
        pt, ct = bytes.fromhex(rec["PT"]), bytes.fromhex(rec["CT"])
        tag = le(bytes.fromhex(rec["TAG"]))
        check_frame(run_frame(model, ctx, nonce, blocks_of(pt), 0, tag), nonce,
                    blocks_of(ct), tag, False)
        used += 1
    print(f"CAVP gcmEncryptExtIV256: {used} cases used")
    assert used > 0


def test_cavp_decrypt():
    model, used, failing = GcmCoreModel(16), 0, 0
    for i, rec in enumerate(cavp_cases("gcmDecrypt256.rsp")):
        ctx = i % 16
        model.install_key(ctx, le(bytes.fromhex(rec["KEY"])))
        nonce = bytes.fromhex(rec["IV"])
        ct, tag = bytes.fromhex(rec["CT"]), le(bytes.fromhex(rec["TAG"]))
        iv_out, *data_out, (tag_out, tag_ok, err) = run_frame(model, ctx, nonce,
                                                              blocks_of(ct), 1, tag)
        assert iv_out == (j0_block(nonce), 0, 0) and err == 0
        assert all(r[1:] == (0, 0) for r in data_out)
        if rec.get("FAIL"):
            assert tag_ok == 0 and tag_out != tag
            failing += 1
        else:
            assert tag_ok == 1 and tag_out == tag
            assert [r[0] for r in data_out] == blocks_of(bytes.fromhex(rec["PT"]))
        used += 1
    print(f"CAVP gcmDecrypt256: {used} cases used, {failing} of them FAIL cases")
    assert used > 0 and failing > 0


# --- misuse ---------------------------------------------------------------------------

ERR = (0, 0, 1)
KEY = bytes(range(32))
NONCE = bytes.fromhex("cafebabefacedbaddecaf888")


@pytest.fixture
def keyed():
    model = GcmCoreModel(16)
    model.install_key(3, le(KEY))
    return model


def good_frame(model, ctx=3, key=KEY, nonce=NONCE, n=3):
    pt = bytes(range(16 * n))
    ct, tag = reference(key, nonce, pt)
    check_frame(run_frame(model, ctx, nonce, blocks_of(pt), 0), nonce, ct, tag, False)
    check_frame(run_frame(model, ctx, nonce, ct, 1, tag), nonce, blocks_of(pt), tag, True)
    state = model.context(ctx)
    assert state.x == 0 and not state.active      # MAC scrubs the partial hash


def test_data_on_idle_context(keyed):
    assert keyed.step(0x1234, 3, Op.DATA, 0) == ERR
    assert keyed.step(0x1234, 3, Op.DATA, 1) == ERR
    good_frame(keyed)                              # the error left no trace
    assert keyed.step(0x1234, 3, Op.DATA, 0) == ERR  # idle again after a MAC


def test_mac_on_idle_context(keyed):
    assert keyed.step(0, 3, Op.MAC, 0) == ERR
    assert keyed.step(0, 3, Op.MAC, 1) == ERR
    good_frame(keyed)
    assert keyed.step(0, 3, Op.MAC, 1) == ERR


def test_op_without_key():
    model = GcmCoreModel(16)
    for op in Op:
        for ctx in (0, 7, 15):
            assert model.step(j0_block(NONCE), ctx, op, 0) == ERR
    model.install_key(7, le(KEY))
    for ctx in (0, 15):
        assert model.step(j0_block(NONCE), ctx, Op.IV, 0) == ERR
    good_frame(model, ctx=7)


@pytest.mark.parametrize("tail", ["00000000", "00000002", "01000000", "000001ff", "ffffffff"])
def test_bad_iv_tail(keyed, tail):
    bad = le(NONCE + bytes.fromhex(tail))
    assert keyed.step(bad, 3, Op.IV, 0) == ERR
    assert keyed.step(0, 3, Op.DATA, 0) == ERR      # still idle
    assert keyed.step(0, 3, Op.MAC, 0) == ERR
    good_frame(keyed)


def test_iv_on_active_context_abandons_frame(keyed):
    iv = j0_block(NONCE)
    assert keyed.step(iv, 3, Op.IV, 0) == (iv, 0, 0)
    assert keyed.step(0xabc, 3, Op.DATA, 0)[2] == 0
    assert keyed.step(iv, 3, Op.IV, 0) == ERR
    assert keyed.step(0xabc, 3, Op.DATA, 0) == ERR
    assert keyed.step(0, 3, Op.MAC, 0) == ERR
    good_frame(keyed)                               # fresh frame: no stale hash


def test_reset_scrubs_everything(keyed):
    keyed.install_key(9, le(KEY[::-1]))
    iv = j0_block(NONCE)
    keyed.step(iv, 3, Op.IV, 0)
    keyed.step(0x55, 3, Op.DATA, 0)
    keyed.reset()
    for ctx in range(16):
        for op in Op:
            assert keyed.step(iv, ctx, op, 0) == ERR
        s = keyed.context(ctx)
        assert (s.key, s.h, s.nonce, s.ctr, s.x, s.active, s.has_key) == (0,) * 5 + (False,) * 2
    keyed.install_key(9, le(KEY))
    assert keyed.step(iv, 3, Op.IV, 0) == ERR       # only ctx 9 got a key back
    good_frame(keyed, ctx=9)


def test_key_reinstall_abandons_frame(keyed):
    iv = j0_block(NONCE)
    assert keyed.step(iv, 3, Op.IV, 0) == (iv, 0, 0)
    keyed.step(0x77, 3, Op.DATA, 0)
    key2 = bytes(range(100, 132))
    keyed.install_key(3, le(key2))
    assert keyed.step(0x77, 3, Op.DATA, 0) == ERR
    assert keyed.step(0, 3, Op.MAC, 0) == ERR
    good_frame(keyed, key=key2)


def test_encrypt_mac_never_reports_tag_ok(keyed):
    pt = bytes(16)
    ct, tag = reference(KEY, NONCE, pt)
    *_, mac = run_frame(keyed, 3, NONCE, blocks_of(pt), 0, mac=tag)
    assert mac == (tag, 0, 0)


def test_forged_tag_every_bit(keyed):
    pt = bytes(range(32))
    ct, tag = reference(KEY, NONCE, pt)
    for bit in range(0, 128, 9):
        *_, mac = run_frame(keyed, 3, NONCE, ct, 1, tag ^ (1 << bit))
        assert mac == (tag, 0, 0)


def test_invalid_op_code(keyed):
    iv = j0_block(NONCE)
    keyed.step(iv, 3, Op.IV, 0)
    assert keyed.step(0, 3, 3, 0) == ERR
    assert keyed.step(iv, 3, 3, 0) == ERR


def test_fewer_contexts():
    model = GcmCoreModel(contexts=4)
    model.install_key(9, le(KEY))                   # ignored: no such context
    assert model.step(j0_block(NONCE), 9, Op.IV, 0) == ERR
    model.install_key(3, le(KEY))
    good_frame(model)


def test_long_frame_counter_and_length_cross_bytes():
    # 300 data blocks: the counter and the length field carry across byte boundaries
    rng = random.Random(SEED + 2)
    model, key, nonce = GcmCoreModel(16), rng.randbytes(32), rng.randbytes(12)
    model.install_key(11, le(key))
    pt = rng.randbytes(16 * 300)
    ct, tag = reference(key, nonce, pt)
    check_frame(run_frame(model, 11, nonce, blocks_of(pt), 0), nonce, ct, tag, False)
    check_frame(run_frame(model, 11, nonce, ct, 1, tag), nonce, blocks_of(pt), tag, True)
