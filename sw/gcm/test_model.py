"""Golden model of ``gcm_core`` against independent references: ``cryptography``'s AESGCM
(OpenSSL) and the NIST CAVP GCM vectors. Expected values never come from the model."""
import os
import random

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from hw.gcm.layout import Op, input_layout, key_layout, output_layout
from sw.gcm.model import GcmCoreModel, frame_beats, gf128_mul, j0_block, join_beat, split_beat
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

@pytest.mark.parametrize("lanes", [1, 2, 4])
def test_layout_widths_and_order(lanes):
    w = 128 * lanes
    assert key_layout().size == 4 + 256 and input_layout(lanes).size == w + 4 + 2 + 1
    assert output_layout(lanes).size == w + 4 + 2 + 1 + 1
    assert [(n, f.offset) for n, f in input_layout(lanes)] == \
        [("block", 0), ("ctx", w), ("op", w + 4), ("decrypt", w + 6)]
    assert [(n, f.offset) for n, f in output_layout(lanes)] == \
        [("block", 0), ("ctx", w), ("op", w + 4), ("tag_ok", w + 6), ("err", w + 7)]
    assert [(n, f.offset) for n, f in key_layout()] == [("ctx", 0), ("key", 4)]
    assert [(op.name, op.value) for op in Op] == [("IV", 0), ("DATA", 1), ("MAC", 2), ("NOP", 3)]


@pytest.mark.parametrize("bad", [0, 3, 8, -1, 2.0, True])
def test_lanes_out_of_range(bad):
    with pytest.raises(ValueError):
        GcmCoreModel(16, bad)
    with pytest.raises(ValueError):
        input_layout(bad)


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
    for op in (Op.IV, Op.DATA, Op.MAC):
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
        for op in (Op.IV, Op.DATA, Op.MAC):
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


def test_nop_passes_anything_through(keyed):
    iv = j0_block(NONCE)
    fresh = GcmCoreModel(4)                          # no key anywhere, few contexts
    for model in (keyed, fresh):
        for ctx in (0, 3, 15):
            for dec in (0, 1):
                assert model.step(iv, ctx, Op.NOP, dec) == (iv, 0, 0)
                assert model.step(0, ctx, 3, dec) == (0, 0, 0)   # op code 3 is NOP
    # a NOP in the middle of a frame on the same context changes nothing
    pt = bytes(range(48))
    ct, tag = reference(KEY, NONCE, pt)
    ops = frame_ops(3, NONCE, blocks_of(pt), 0)
    results = []
    for n, op in enumerate(ops):
        results.append(keyed.step(*op))
        assert keyed.step(0xdead << n, 3, Op.NOP, 1) == (0xdead << n, 0, 0)
    check_frame(results, NONCE, ct, tag, False)
    with pytest.raises(ValueError):
        keyed.step(0, 3, 4, 0)                       # not a 2-bit op code


# --- lanes ----------------------------------------------------------------------------

def run_beats(model, ctx, nonce, blocks, decrypt, mac=0):
    """The output blocks of one frame sent as beats, and the last beat's tag_ok."""
    out, tag_ok = [], None
    for op, beat in frame_beats(nonce, blocks, model.lanes, mac):
        block, tag_ok, err = model.step(beat, ctx, op, decrypt)
        assert err == 0
        out += split_beat(block, model.lanes)
    return out, tag_ok


@pytest.mark.parametrize("lanes", [1, 2, 4])
def test_every_frame_length_vs_aesgcm(lanes):
    rng = random.Random(SEED + 10 * lanes)
    model = GcmCoreModel(16, lanes)
    key = rng.randbytes(32)
    model.install_key(6, le(key))
    lengths = [n for n in range(0, 63) if (n + 2) % lanes == 0 and n + 2 >= 2 * lanes]
    assert lengths[0] == 2 * lanes - 2 and lengths[-1] + 2 == 64
    for n in lengths:
        nonce, pt = rng.randbytes(12), rng.randbytes(16 * n)
        ct, tag = reference(key, nonce, pt)
        out, tag_ok = run_beats(model, 6, nonce, blocks_of(pt), 0, rng.getrandbits(128))
        assert out == [j0_block(nonce)] + ct + [tag] and tag_ok == 0, f"{n} blocks"
        forged = rng.random() < 0.3
        out, tag_ok = run_beats(model, 6, nonce, ct, 1, tag ^ forged << rng.randrange(128))
        assert out == [j0_block(nonce)] + blocks_of(pt) + [tag] and tag_ok == (not forged)


# The CAVP texts that fit are 1 or 2 blocks: frames of 3 or 4 blocks, which make whole
# beats only at lanes 2 (4 blocks); at lanes 4 a frame needs at least 6 data blocks.
@pytest.mark.parametrize("lanes", [2])
def test_lanes_cavp(lanes):
    used = 0
    for fname, decrypt in (("gcmEncryptExtIV256.rsp", 0), ("gcmDecrypt256.rsp", 1)):
        for rec in cavp_cases(fname):
            key, nonce = bytes.fromhex(rec["KEY"]), bytes.fromhex(rec["IV"])
            ct, tag = bytes.fromhex(rec["CT"]), le(bytes.fromhex(rec["TAG"]))
            blocks = blocks_of(ct if decrypt else bytes.fromhex(rec["PT"]))
            if (len(blocks) + 2) % lanes or len(blocks) + 2 < 2 * lanes:
                continue                             # not a whole number of beats
            model = GcmCoreModel(16, lanes)
            model.install_key(0, le(key))
            out, tag_ok = run_beats(model, 0, nonce, blocks, decrypt, tag if decrypt else 0)
            if decrypt and rec.get("FAIL"):
                assert tag_ok == 0
            elif decrypt:
                assert tag_ok == 1 and out[1:-1] == blocks_of(bytes.fromhex(rec["PT"]))
            else:
                assert out[1:-1] == blocks_of(ct) and out[-1] == tag
            used += 1
    print(f"CAVP at lanes {lanes}: {used} cases")
    assert used > 0


@pytest.mark.parametrize("lanes", [2, 4])
def test_lanes_misuse_answers_a_whole_zero_beat(lanes):
    model = GcmCoreModel(16, lanes)
    model.install_key(3, le(KEY))
    iv = j0_block(NONCE)
    beat = join_beat([iv] + [0x1234] * (lanes - 1))
    zero = (0, 0, 1)
    assert model.step(beat, 3, Op.DATA, 0) == zero                 # idle
    assert model.step(beat, 3, Op.MAC, 1) == zero
    assert model.step(beat ^ 1 << 120, 3, Op.IV, 0) == zero        # bad tail in lane 0
    assert model.step(beat, 5, Op.IV, 0) == zero                   # no key
    assert model.step(beat, 3, Op.IV, 0)[2] == 0
    assert model.step(beat, 3, Op.IV, 0) == zero                   # IV on active
    assert model.step(beat, 3, Op.DATA, 0) == zero                 # ... abandoned
    with pytest.raises(ValueError):
        model.step(1 << 128 * lanes, 3, Op.NOP, 0)


def test_frame_beats_rejects_partial_beats():
    with pytest.raises(ValueError):
        frame_beats(NONCE, [1, 2, 3], 4)                          # 5 blocks
    with pytest.raises(ValueError):
        frame_beats(NONCE, [1, 2], 4)                             # one beat
    assert [op for op, _ in frame_beats(NONCE, list(range(6)), 4)] == [Op.IV, Op.MAC]


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


# --- derived secrets (what the reset-scrub scans look for) ------------------------------

@pytest.mark.parametrize("decrypt", [False, True])
def test_frame_secrets_against_openssl(decrypt):
    """H, E_K(J0), the partial hashes and S of :func:`frame_secrets` against OpenSSL: H and
    E_K(J0) are AES-ECB of 0 and J0, S ⊕ E_K(J0) is AESGCM's tag, and each partial hash
    is the one before, plus the ciphertext block, times H (SP 800-38D's GHASH step)."""
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

    from sw.gcm.model import _be, _bus, frame_secrets, h_powers, len_block

    rng = random.Random(SEED)
    for n in (0, 1, 5, 17):
        key, nonce, pt = rng.randbytes(32), rng.randbytes(12), rng.randbytes(16 * n)
        ct, tag = reference(key, nonce, pt) if n else ([], le(AESGCM(key).encrypt(nonce, b"", None)))
        sec = frame_secrets(le(key), nonce, ct if decrypt else blocks_of(pt), decrypt)
        ecb = Cipher(algorithms.AES(key), modes.ECB()).encryptor()
        assert sec.h == le(ecb.update(bytes(16)))
        assert sec.ek0 == le(ecb.update(nonce + bytes([0, 0, 0, 1])))
        assert sec.tag == tag and sec.s ^ sec.ek0 == tag
        assert len(sec.x) == n + 1 and sec.x[0] == 0
        for k, c in enumerate(ct):
            assert sec.x[k + 1] == _bus(gf128_mul(_be(sec.x[k] ^ c), _be(sec.h)))
        assert sec.s == _bus(gf128_mul(_be(sec.x[-1] ^ len_block(n)), _be(sec.h)))
        h = h_powers(le(key), 4)
        assert h[0] == sec.h and h[3] == _bus(gf128_mul(_be(h[1]), _be(h[1])))
