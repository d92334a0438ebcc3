"""A full SPDM session between the CVM driver's requester and the GPU firmware's
responder, and the requester's checks: a tampered chain, signature, transcript, verify
data or measurement summary is rejected with the VerificationError subclass that names it.

Tampering runs through a man-in-the-middle transport that changes one byte of one
message; every check is shown to fail by a tamper aimed at it.
"""
import hashlib

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from sw.spdm import errors
from sw.spdm.conftest import Recorder, rts_values
from sw.spdm.messages import V11, V12, RequestCode, ResponseCode
from sw.spdm.requester import Requester
from sw.spdm.responder import Responder


def flip_in(code, offset, *, nth=0):
    """on_response hook: flip bit 0 of byte *offset* (negative: from the end) of the
    *nth* response with this code."""
    seen = [0]

    def hook(req, rsp):
        if rsp[1] == code:
            seen[0] += 1
            if seen[0] - 1 == nth:
                b = bytearray(rsp)
                b[offset] ^= 1
                return bytes(b)
        return rsp
    return hook


@pytest.mark.parametrize("versions, expect", [((V11, V12), V12), ((V11,), V11), ((V12,), V12)])
def test_full_session(device, manufacturer, versions, expect):
    values = rts_values()
    responder = Responder(device, lambda: values, extend_counts=lambda: list(range(64)))
    result = Requester(Recorder(responder), manufacturer.root, versions=versions).run()
    assert result.version == expect == responder.version
    assert [c.subject for c in result.certificates] == [c.subject for c in device.certificates]
    assert [b.dmtf_value().value for b in result.measurements] == values
    assert [b.index for b in result.measurements] == list(range(1, 65))
    # both sides hold the same session keys; 32-byte keys, 12-byte IVs, directions differ
    assert result.keys == responder.session_keys
    for d in (result.keys.request, result.keys.response):
        assert len(d.key) == 32 and len(d.iv) == 12
    assert result.keys.request != result.keys.response
    # a frame sealed by the CVM with the request-direction key opens at the GPU, and back
    frame = AESGCM(result.keys.request.key).encrypt(result.keys.request.iv, b"to the GPU", b"")
    assert AESGCM(responder.session_keys.request.key).decrypt(responder.session_keys.request.iv, frame, b"") \
        == b"to the GPU"
    chunks = -(-len(device.cert_chain()) // 1024)
    assert result.messages == 8 + chunks  # 3 negotiation, DIGESTS, CERTIFICATE chunks, 4 more


def test_message_sequence(device, manufacturer):
    rec = Recorder(Responder(device, rts_values))
    Requester(rec, manufacturer.root).run()
    chain_chunks = -(-len(device.cert_chain()) // 1024)
    assert [r[1] for r, _ in rec.log] == [
        RequestCode.GET_VERSION, RequestCode.GET_CAPABILITIES, RequestCode.NEGOTIATE_ALGORITHMS,
        RequestCode.GET_DIGESTS, *[RequestCode.GET_CERTIFICATE] * chain_chunks, RequestCode.CHALLENGE,
        RequestCode.GET_MEASUREMENTS, RequestCode.KEY_EXCHANGE, RequestCode.FINISH]
    assert all(rsp[1] != ResponseCode.ERROR for _, rsp in rec.log)


def test_sessions_differ(device, manufacturer):
    """Fresh DHE keys and nonces: two sessions (after an FLR) never share keys."""
    responder = Responder(device, rts_values)
    first = Requester(responder.handle, manufacturer.root).run().keys
    responder.reset()
    second = Requester(responder.handle, manufacturer.root).run().keys
    assert first.request.key != second.request.key and first.response.key != second.response.key


def test_untrusted_root(device):
    from sw.spdm.identity import Manufacturer
    other = Manufacturer(b"another maker")
    with pytest.raises(errors.ChainError, match="trusted root"):
        Requester(Responder(device, rts_values).handle, other.root).run()


def test_device_keys_are_the_makers():
    """Two manufacturers issue different keys for the same serial number (the device keys
    derive from the maker's seed too), and one maker issues the same keys again."""
    from cryptography.hazmat.primitives import serialization

    from sw.spdm.identity import Manufacturer

    def public(identity):
        return [k.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
                for k in (identity.device_key, identity.attestation_key)]
    a, b = Manufacturer(b"maker a"), Manufacturer(b"maker b")
    mine, again, theirs = public(a.issue_device(7)), public(a.issue_device(7)), public(b.issue_device(7))
    assert mine == again
    assert mine[0] != theirs[0] and mine[1] != theirs[1]


def _chain_offset(device, cert_index):
    """Offset in the SPDM chain of a byte inside certificate *cert_index*'s signature."""
    ders = device.ders()
    return 4 + 48 + sum(len(d) for d in ders[:cert_index + 1]) - 10


@pytest.mark.parametrize("where, error, message", [
    ("digest", errors.ChainError, "DIGESTS"),
    ("root hash", errors.ChainError, "RootHash"),  # DIGESTS recomputed: only the RootHash check can fire
    ("intermediate signature", errors.ChainError, "certificate 2: signature"),
    ("leaf signature", errors.ChainError, "certificate 4: signature"),
    ("challenge signature", errors.SignatureError, "challenge_auth"),
    ("challenge nonce", errors.SignatureError, "challenge_auth"),
    ("challenge chain hash", errors.ChainError, "another certificate chain"),
    ("challenge summary", errors.SignatureError, "challenge_auth"),
    ("measurement value", errors.SignatureError, "measurements"),
    ("measurement nonce", errors.SignatureError, "measurements"),
    ("measurement opaque", errors.SignatureError, "measurements"),
    ("measurement signature", errors.SignatureError, "measurements"),
    ("key exchange point", errors.SignatureError, "key_exchange_rsp"),
    ("key exchange signature", errors.SignatureError, "key_exchange_rsp"),
    ("key exchange verify data", errors.VerifyDataError, "ResponderVerifyData"),
    ("version transcript", errors.SignatureError, "challenge_auth"),
    ("capabilities transcript", errors.SignatureError, "challenge_auth"),
])
def test_tamper_rejected(device, manufacturer, where, error, message):
    responder = Responder(device, rts_values)
    chain = device.cert_chain()
    hooks = {}

    def rewrite_cert(offset):
        # the CERTIFICATE response carrying chain byte *offset*, with the DIGESTS answer
        # recomputed so that only the targeted check can fire
        def on_response(req, rsp):
            if rsp[1] == ResponseCode.CERTIFICATE:
                start = int.from_bytes(req[4:6], "little")
                if start <= offset < start + int.from_bytes(rsp[4:6], "little"):
                    b = bytearray(rsp)
                    b[8 + offset - start] ^= 1
                    return bytes(b)
            if rsp[1] == ResponseCode.DIGESTS:
                tampered = bytearray(chain)
                tampered[offset] ^= 1
                return rsp[:4] + hashlib.sha384(bytes(tampered)).digest()
            return rsp
        return on_response

    if where == "digest":
        hooks["on_response"] = flip_in(ResponseCode.DIGESTS, 4)
    elif where == "root hash":
        hooks["on_response"] = rewrite_cert(4)
    elif where == "intermediate signature":
        hooks["on_response"] = rewrite_cert(_chain_offset(device, 2))
    elif where == "leaf signature":
        hooks["on_response"] = rewrite_cert(_chain_offset(device, 4))
    elif where == "challenge signature":
        hooks["on_response"] = flip_in(ResponseCode.CHALLENGE_AUTH, -1)
    elif where == "challenge nonce":
        hooks["on_response"] = flip_in(ResponseCode.CHALLENGE_AUTH, 4 + 48)
    elif where == "challenge chain hash":
        hooks["on_response"] = flip_in(ResponseCode.CHALLENGE_AUTH, 4)
    elif where == "challenge summary":
        hooks["on_response"] = flip_in(ResponseCode.CHALLENGE_AUTH, 4 + 48 + 32)
    elif where == "measurement value":
        hooks["on_response"] = flip_in(ResponseCode.MEASUREMENTS, 8 + 7 + 10)
    elif where == "measurement nonce":
        hooks["on_response"] = flip_in(ResponseCode.MEASUREMENTS, 8 + 64 * 55)
    elif where == "measurement opaque":
        hooks["on_response"] = flip_in(ResponseCode.MEASUREMENTS, -96 - 3)
    elif where == "measurement signature":
        hooks["on_response"] = flip_in(ResponseCode.MEASUREMENTS, -50)
    elif where == "key exchange point":
        # a different valid point: the responder's signature no longer covers it
        def on_response(req, rsp):
            if rsp[1] == ResponseCode.KEY_EXCHANGE_RSP:
                from cryptography.hazmat.primitives import serialization
                from cryptography.hazmat.primitives.asymmetric import ec
                other = ec.generate_private_key(ec.SECP384R1()).public_key().public_bytes(
                    serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)[1:]
                return rsp[:40] + other + rsp[136:]
            return rsp
        hooks["on_response"] = on_response
    elif where == "key exchange signature":
        hooks["on_response"] = flip_in(ResponseCode.KEY_EXCHANGE_RSP, -49)
    elif where == "key exchange verify data":
        hooks["on_response"] = flip_in(ResponseCode.KEY_EXCHANGE_RSP, -1)
    elif where == "version transcript":
        # the requester sees a VERSION that also lists 1.0 (0x1000): it still picks 1.2,
        # but its VCA differs from the responder's, so the first signature fails
        def on_response(req, rsp):
            if rsp[1] == ResponseCode.VERSION:
                return rsp[:5] + bytes([rsp[5] + 1]) + rsp[6:] + b"\x00\x10"
            return rsp
        hooks["on_response"] = on_response
    elif where == "capabilities transcript":
        hooks["on_response"] = flip_in(ResponseCode.CAPABILITIES, 5)  # CTExponent
    with pytest.raises(error, match=message):
        Requester(Recorder(responder, **hooks), manufacturer.root).run()


def test_measurements_changed_after_challenge(device, manufacturer):
    """A slot extended between CHALLENGE and GET_MEASUREMENTS: the summary hash the
    CHALLENGE_AUTH signed no longer matches the reported blocks."""
    values = rts_values()
    calls = [0]

    def rts():
        calls[0] += 1
        if calls[0] > 1:
            return values[:5] + [hashlib.sha384(b"late extend").digest()] + values[6:]
        return values
    with pytest.raises(errors.MeasurementSummaryError):
        Requester(Responder(device, rts).handle, manufacturer.root).run()


def test_error_response_raised(device, manufacturer):
    """A responder that only answers ERROR: the requester raises ErrorResponseError."""
    with pytest.raises(errors.ErrorResponseError) as e:
        Requester(lambda raw: bytes([0x10, 0x7F, 0x03, 0x00]), manufacturer.root).run()
    assert e.value.code == 0x03


def test_wrong_response_kind(device, manufacturer):
    responder = Responder(device, rts_values)

    def swap(raw):
        rsp = responder.handle(raw)
        if raw[1] == RequestCode.GET_DIGESTS:
            return responder.handle(bytes([raw[0], RequestCode.GET_CERTIFICATE, 0, 0, 0, 0, 16, 0]))
        return rsp
    with pytest.raises(errors.ProtocolError):
        Requester(swap, manufacturer.root).run()


def test_no_common_version(device, manufacturer):
    responder = Responder(device, rts_values, versions=(V11,))
    with pytest.raises(errors.NegotiationError):
        Requester(responder.handle, manufacturer.root, versions=(V12,)).run()


def test_dma_key_writes(device, manufacturer):
    """The firmware-port writes that would hand the session to cc_dma: KEY0..7 carry the
    request-direction key on the IN channel and the response-direction key on the OUT
    channel (little-endian words, as GpuTB.write_key_regs lays them out), then go, then
    zeros, at the addresses of gpu_cc's register map (hw/cc/regs.py)."""
    from hw.cc.regs import DMA_KEY_CTRL, DMA_KEY_GO, DMA_KEY_IV, register_map
    from sw.spdm import dma
    regs = {r.name: r.addr for r in register_map()}
    keys = Requester(Responder(device, rts_values).handle, manufacturer.root).run().keys
    writes = dma.session_key_writes(keys, in_channel=2, out_channel=3)
    assert len(writes) == 2 * 18
    for (base, key, ch) in ((0, keys.request.key, 2), (18, keys.response.key, 3)):
        assert [a for a, _ in writes[base:base + 8]] == [regs[f"KEY{k}"] for k in range(8)]
        value = sum(v << (32 * k) for k, (_, v) in enumerate(writes[base:base + 8]))
        assert value.to_bytes(32, "little") == key
        assert writes[base + 8:base + 10] == [(DMA_KEY_IV, 0), (DMA_KEY_CTRL, DMA_KEY_GO | ch)]
        assert [a for a, _ in writes[base + 10:base + 18]] == [regs[f"KEY{k}"] for k in range(8)]
        assert all(v == 0 for _, v in writes[base + 10:base + 18])
    with pytest.raises(ValueError):
        dma.session_key_writes(keys, 1, 1)


def _identity_with(manufacturer, *, leaf_ca=False, leaf_curve=None, swap=False):
    """A device whose chain breaks one rule verify_chain checks."""
    from cryptography.hazmat.primitives.asymmetric import ec

    from sw.spdm.identity import DeviceIdentity, issue_certificate, model_name
    good = manufacturer.issue_device(7)
    device_cert = good.certificates[3]
    ak = ec.generate_private_key(leaf_curve) if leaf_curve else good.attestation_key
    leaf = issue_certificate(model_name("bad leaf"), ak, device_cert.subject, good.device_key, ca=leaf_ca,
                             path_len=0 if leaf_ca else None)
    certs = [*good.certificates[:4], leaf]
    if swap:
        certs[1], certs[2] = certs[2], certs[1]
    return DeviceIdentity(good.device_key, ak, tuple(certs))


@pytest.mark.parametrize("flaw, message", [
    (dict(leaf_ca=True), "CA flag"),
    (dict(swap=True), "issuer is not"),
])
def test_chain_rules(manufacturer, flaw, message):
    identity = _identity_with(manufacturer, **flaw)
    with pytest.raises(errors.ChainError, match=message):
        Requester(Responder(identity, rts_values).handle, manufacturer.root).run()


def test_chain_leaf_not_p384(manufacturer):
    from cryptography.hazmat.primitives.asymmetric import ec
    identity = _identity_with(manufacturer, leaf_curve=ec.SECP256R1())
    with pytest.raises(errors.ChainError, match="P-384"):
        Requester(Responder(identity, rts_values).handle, manufacturer.root).run()


def test_echoed_nonce(device, manufacturer):
    """CHALLENGE_AUTH carrying the requester's own nonce (a reflection): NonceError."""
    def on_response(req, rsp):
        if rsp[1] == ResponseCode.CHALLENGE_AUTH:
            return rsp[:52] + req[4:36] + rsp[84:]
        return rsp
    with pytest.raises(errors.NonceError):
        Requester(Recorder(Responder(device, rts_values), on_response=on_response), manufacturer.root).run()


def test_algorithms_outside_h100_set(device, manufacturer):
    """ALGORITHMS selecting ECDSA P-256 instead of P-384: NegotiationError."""
    def on_response(req, rsp):
        if rsp[1] == ResponseCode.ALGORITHMS:
            return rsp[:12] + (0x10).to_bytes(4, "little") + rsp[16:]   # BaseAsymSel at offset 12
        return rsp
    with pytest.raises(errors.NegotiationError):
        Requester(Recorder(Responder(device, rts_values), on_response=on_response), manufacturer.root).run()


def test_response_at_other_version(device, manufacturer):
    def on_response(req, rsp):
        if rsp[1] == ResponseCode.DIGESTS:
            return bytes([0x11 if rsp[0] == 0x12 else 0x12]) + rsp[1:]
        return rsp
    with pytest.raises(errors.ProtocolError, match="version"):
        Requester(Recorder(Responder(device, rts_values), on_response=on_response), manufacturer.root).run()


@pytest.mark.parametrize("version", [V11, V12], ids=["1.1", "1.2"])
def test_h100_order(device, manufacturer, version):
    """NVIDIA's driver order (no CHALLENGE; the report after FINISH): same keys on both
    ends, the report verifies, and a slot extended between KEY_EXCHANGE and
    GET_MEASUREMENTS is caught by KEY_EXCHANGE_RSP's summary hash."""
    values = rts_values()
    responder = Responder(device, lambda: values)
    rec = Recorder(responder)
    result = Requester(rec, manufacturer.root, versions=(version,)).run(h100_order=True)
    assert result.keys == responder.session_keys
    assert [r[1] for r, _ in rec.log][-3:] == [RequestCode.KEY_EXCHANGE, RequestCode.FINISH,
                                              RequestCode.GET_MEASUREMENTS]
    assert RequestCode.CHALLENGE not in [r[1] for r, _ in rec.log]
    assert [b.dmtf_value().value for b in result.measurements] == values
    responder.reset()
    calls = [0]

    def rts():
        calls[0] += 1
        return values if calls[0] == 1 else values[:9] + [bytes(48)] + values[10:]
    with pytest.raises(errors.MeasurementSummaryError, match="KEY_EXCHANGE_RSP"):
        Requester(Responder(device, rts).handle, manufacturer.root, versions=(version,)).run(h100_order=True)
