"""The session keys against an independent computation of the DSP0274 key schedule.

The test records the messages on the wire, rebuilds TH1 and TH2 from them as DSP0274
defines the transcripts (VCA || Hash(certificate chain) || KEY_EXCHANGE ||
KEY_EXCHANGE_RSP [|| FINISH || FINISH_RSP]), recomputes the DHE secret from its own
ephemeral key and the responder's point, and derives every secret step by step with
``hmac`` (HKDF-Extract) and ``cryptography``'s ``HKDFExpand``, building the BinConcat
info strings by hand. Nothing in :mod:`sw.spdm.keys` is called. It also recomputes
ResponderVerifyData and RequesterVerifyData from the wire.

No published SPDM key-schedule test vectors were found (libspdm's unit tests compare
against its own functions); HKDF-SHA-384 itself is ``cryptography``'s.
"""
import hashlib
import hmac

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.kdf.hkdf import HKDFExpand

from sw.spdm.conftest import Recorder, rts_values
from sw.spdm.messages import V11, V12, RequestCode
from sw.spdm.requester import Requester
from sw.spdm.responder import Responder

H = 48


def expand(prk, info, n):
    return HKDFExpand(hashes.SHA384(), n, info).derive(prk)


def info(length, version_label, label, context=b""):
    # BinConcat: Length (uint16, little-endian) || "spdm1.x " || Label || Context
    return bytes([length & 0xFF, length >> 8]) + version_label + label + context


@pytest.mark.parametrize("version, label", [(V12, b"spdm1.2 "), (V11, b"spdm1.1 ")])
def test_key_schedule_independent(device, manufacturer, version, label):
    responder = Responder(device, rts_values)
    transport = Recorder(responder)
    wire = transport.log
    ephemeral = ec.generate_private_key(ec.SECP384R1())
    result = Requester(transport, manufacturer.root, versions=(version,), dhe_keygen=lambda: ephemeral).run()

    by_code = {}
    for req, rsp in wire:
        by_code.setdefault(req[1], []).append((req, rsp))
    vca = b"".join(req + rsp for req, rsp in wire[:3])
    assert [w[0][1] for w in wire[:3]] == [RequestCode.GET_VERSION, RequestCode.GET_CAPABILITIES,
                                          RequestCode.NEGOTIATE_ALGORITHMS]
    chain = b"".join(rsp[8:] for _, rsp in by_code[RequestCode.GET_CERTIFICATE])
    ct = hashlib.sha384(chain).digest()
    ke_req, ke_rsp = by_code[RequestCode.KEY_EXCHANGE][0]
    fin_req, fin_rsp = by_code[RequestCode.FINISH][0]

    # DHE: the responder's ExchangeData is X || Y at offset 40 (header 4, session id 2,
    # MutAuthRequested 1, ReqSlotIDParam 1, RandomData 32)
    peer = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP384R1(), b"\x04" + ke_rsp[40:136])
    dhe_secret = ephemeral.exchange(ec.ECDH(), peer)

    th1 = hashlib.sha384(vca + ct + ke_req + ke_rsp[:-H]).digest()        # up to the signature, inclusive
    th2 = hashlib.sha384(vca + ct + ke_req + ke_rsp + fin_req + fin_rsp).digest()

    handshake_secret = hmac.new(bytes(H), dhe_secret, hashlib.sha384).digest()      # HKDF-Extract(salt 0^H)
    req_hs = expand(handshake_secret, info(H, label, b"req hs data", th1), H)
    rsp_hs = expand(handshake_secret, info(H, label, b"rsp hs data", th1), H)
    req_finished = expand(req_hs, info(H, label, b"finished"), H)
    rsp_finished = expand(rsp_hs, info(H, label, b"finished"), H)
    salt1 = expand(handshake_secret, info(H, label, b"derived"), H)
    master = hmac.new(salt1, bytes(H), hashlib.sha384).digest()                     # HKDF-Extract(Salt1, 0^H)
    req_data = expand(master, info(H, label, b"req app data", th2), H)
    rsp_data = expand(master, info(H, label, b"rsp app data", th2), H)
    export = expand(master, info(H, label, b"exp master", th2), H)

    # the verify data on the wire
    assert ke_rsp[-H:] == hmac.new(rsp_finished, th1, hashlib.sha384).digest()
    finish_th = hashlib.sha384(vca + ct + ke_req + ke_rsp + fin_req[:4]).digest()
    assert fin_req[4:] == hmac.new(req_finished, finish_th, hashlib.sha384).digest()

    keys = result.keys
    assert keys == responder.session_keys
    assert keys.master_secret == master
    assert (keys.request_data_secret, keys.response_data_secret, keys.export_master_secret) == (req_data, rsp_data,
                                                                                              export)
    assert keys.request.key == expand(req_data, info(32, label, b"key"), 32)
    assert keys.request.iv == expand(req_data, info(12, label, b"iv"), 12)
    assert keys.response.key == expand(rsp_data, info(32, label, b"key"), 32)
    assert keys.response.iv == expand(rsp_data, info(12, label, b"iv"), 12)


def test_bin_concat_layout():
    """One BinConcat written out byte by byte from DSP0274's definition."""
    from sw.spdm.keys import bin_concat
    assert bin_concat(48, V12, b"derived") == b"\x30\x00" + b"spdm1.2 " + b"derived"
    assert bin_concat(12, V11, b"iv", b"\xaa") == b"\x0c\x00spdm1.1 iv\xaa"


@pytest.mark.parametrize("version", [V11, V12], ids=["1.1", "1.2"])
def test_signatures_independent(device, manufacturer, version):
    """CHALLENGE_AUTH, MEASUREMENTS and KEY_EXCHANGE_RSP signatures verified from the
    wire bytes with the signed message built here from DSP0274's definition (1.2:
    "dmtf-spdm-v1.2.*" × 4, zero pad, context, SHA-384 of the transcript; 1.1: the
    transcript), not with sw.spdm.signing."""
    from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature
    responder = Responder(device, rts_values)
    transport = Recorder(responder)
    wire = transport.log
    Requester(transport, manufacturer.root, versions=(version,)).run()
    vca = b"".join(req + rsp for req, rsp in wire[:3])
    by_code = {req[1]: (req, rsp) for req, rsp in wire}
    message_b = b"".join(req + rsp for req, rsp in wire[3:] if req[1] in (RequestCode.GET_DIGESTS,
                                                                          RequestCode.GET_CERTIFICATE))
    chain = b"".join(rsp[8:] for req, rsp in wire if req[1] == RequestCode.GET_CERTIFICATE)
    ch_req, ch_rsp = by_code[RequestCode.CHALLENGE]
    m_req, m_rsp = by_code[RequestCode.GET_MEASUREMENTS]
    k_req, k_rsp = by_code[RequestCode.KEY_EXCHANGE]
    cases = [
        (b"responder-challenge_auth signing", vca + message_b + ch_req + ch_rsp[:-96], ch_rsp[-96:]),
        (b"responder-measurements signing", (vca if version == V12 else b"") + m_req + m_rsp[:-96], m_rsp[-96:]),
        (b"responder-key_exchange_rsp signing", vca + hashlib.sha384(chain).digest() + k_req + k_rsp[:-144],
         k_rsp[-144:-48]),
    ]
    key = device.leaf.public_key()
    for context, transcript, sig in cases:
        if version == V12:
            signed = b"dmtf-spdm-v1.2.*" * 4 + bytes(36 - len(context)) + context + hashlib.sha384(transcript).digest()
        else:
            signed = transcript
        der = encode_dss_signature(int.from_bytes(sig[:48], "big"), int.from_bytes(sig[48:], "big"))
        key.verify(der, signed, ec.ECDSA(hashes.SHA384()))  # raises InvalidSignature on a mismatch
