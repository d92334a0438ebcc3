"""The responder's ERROR reactions, table-driven: every request type out of order,
replayed, at a wrong version, truncated and with a byte appended gets the ERROR code
DSP0274 names (docs/spdm.md, "Error reactions"), at both SPDM versions; after each ERROR
the responder is still in the state it was in (the right request then succeeds).

Each request is sent in the state named in the table, reached with valid requests
(through the requester's own steps, so the session states carry real keys).
"""
import hashlib

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from sw.spdm import keys as ks
from sw.spdm.conftest import rts_values
from sw.spdm.messages import (
    V10,
    V11,
    V12,
    Aead,
    AlgStruct,
    AlgType,
    BaseAsym,
    BaseHash,
    Challenge,
    Dhe,
    ErrorCode,
    ErrorResponse,
    Finish,
    GetCapabilities,
    GetCertificate,
    GetDigests,
    GetMeasurements,
    GetVersion,
    KeyExchange,
    KeySchedule,
    NegotiateAlgorithms,
    ResponseCode,
    decode_response,
)
from sw.spdm.requester import REQUESTER_CAPS, Requester
from sw.spdm.responder import Responder

STATES = ("start", "version", "capabilities", "negotiated", "handshake", "session")
HOME = {  # the state in which each request is the right next one
    "GET_VERSION": "start", "GET_CAPABILITIES": "version", "NEGOTIATE_ALGORITHMS": "capabilities",
    "GET_DIGESTS": "negotiated", "GET_CERTIFICATE": "negotiated", "CHALLENGE": "negotiated",
    "GET_MEASUREMENTS": "negotiated", "KEY_EXCHANGE": "negotiated", "FINISH": "handshake",
}
RESPONSE = {"GET_VERSION": ResponseCode.VERSION, "GET_CAPABILITIES": ResponseCode.CAPABILITIES,
            "NEGOTIATE_ALGORITHMS": ResponseCode.ALGORITHMS, "GET_DIGESTS": ResponseCode.DIGESTS,
            "GET_CERTIFICATE": ResponseCode.CERTIFICATE, "CHALLENGE": ResponseCode.CHALLENGE_AUTH,
            "GET_MEASUREMENTS": ResponseCode.MEASUREMENTS, "KEY_EXCHANGE": ResponseCode.KEY_EXCHANGE_RSP,
            "FINISH": ResponseCode.FINISH_RSP}


class Session:
    """A responder driven to *state* by a requester's own steps; ``request(name)`` gives
    the valid bytes of each request at this point."""

    def __init__(self, device, root, version, state):
        self.responder = Responder(device, rts_values)
        self.requester = Requester(self.responder.handle, root, versions=(version,))
        self.version = version
        self.finish_bytes = Finish(version, bytes(48)).encode()
        req = self.requester
        if state == "start":
            return
        if state in ("version", "capabilities"):
            self.send(GetVersion().encode())
            if state == "capabilities":
                self.send(self.request("GET_CAPABILITIES"))
            return
        req.negotiate()
        if state == "negotiated":
            return
        req.fetch_certificates()
        req.challenge()
        req.get_measurements()
        # the FINISH a real requester would send next, captured from its own finish()
        sent = []
        original = req._transport
        req._transport = lambda raw: (sent.append(raw), original(raw))[1]
        req.key_exchange()
        if state == "handshake":
            header = Finish(version, bytes(48)).header()
            verify = ks.hmac384(req.handshake.request_finished_key, hashlib.sha384(req.transcript_k + header).digest())
            self.finish_bytes = Finish(version, verify).encode()
            return
        req.finish()
        self.finish_bytes = sent[-1]

    def send(self, raw):
        return self.responder.handle(raw)

    def request(self, name):
        v = self.version
        dts = 0x1200 if v >= V12 else 0
        if name == "NEGOTIATE_ALGORITHMS":
            return NegotiateAlgorithms(v, 1, 0, BaseAsym.ECDSA_P384, BaseHash.SHA_384, (
                AlgStruct(AlgType.DHE, Dhe.SECP384R1), AlgStruct(AlgType.AEAD, Aead.AES_256_GCM),
                AlgStruct(AlgType.KEY_SCHEDULE, KeySchedule.SPDM))).encode()
        if name == "KEY_EXCHANGE":
            point = ec.generate_private_key(ec.SECP384R1()).public_key().public_bytes(
                serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)[1:]
            return KeyExchange(v, 0xFF, 0, 7, bytes(32), point).encode()
        return {
            "GET_VERSION": lambda: GetVersion().encode(),
            "GET_CAPABILITIES": lambda: GetCapabilities(v, 12, int(REQUESTER_CAPS), dts, dts).encode(),
            "GET_DIGESTS": lambda: GetDigests(v).encode(),
            "GET_CERTIFICATE": lambda: GetCertificate(v, 0, 0, 0x400).encode(),
            "CHALLENGE": lambda: Challenge(v, 0, 0xFF, bytes(range(32))).encode(),
            "GET_MEASUREMENTS": lambda: GetMeasurements(v, True, 0xFF, bytes(range(32))).encode(),
            "FINISH": lambda: self.finish_bytes,
        }[name]()


def error_of(raw):
    rsp = decode_response(raw)
    assert isinstance(rsp, ErrorResponse), f"expected ERROR, got {type(rsp).__name__}"
    return rsp


def _cases():
    U, V, INV, S = (ErrorCode.UNEXPECTED_REQUEST, ErrorCode.VERSION_MISMATCH, ErrorCode.INVALID_REQUEST,
                    ErrorCode.SESSION_LIMIT_EXCEEDED)
    cases = []
    # out of order: every request in every state before its home state
    for name, home in HOME.items():
        for state in STATES[:STATES.index(home)]:
            if name != "GET_VERSION":
                cases.append(("out of order", name, state, U))
    # replayed: a request sent again in the state after it succeeded
    cases += [("replayed", "GET_CAPABILITIES", "capabilities", U), ("replayed", "GET_CAPABILITIES", "negotiated", U),
              ("replayed", "NEGOTIATE_ALGORITHMS", "negotiated", U), ("replayed", "NEGOTIATE_ALGORITHMS", "session", U),
              ("replayed", "KEY_EXCHANGE", "handshake", U), ("replayed", "KEY_EXCHANGE", "session", S),
              ("replayed", "FINISH", "session", U)]
    for name, home in HOME.items():
        cases += [("wrong version", name, home, V), ("truncated", name, home, INV), ("extra byte", name, home, INV)]
    return cases


@pytest.mark.parametrize("version", [V11, V12], ids=["1.1", "1.2"])
@pytest.mark.parametrize("kind, name, state, code", _cases(),
                         ids=lambda x: x if isinstance(x, str) else getattr(x, "name", None))
def test_error_reaction(device, manufacturer, version, kind, name, state, code):
    s = Session(device, manufacturer.root, version, state)
    raw = s.request(name)
    if kind == "wrong version":
        other = {"GET_VERSION": V11, "GET_CAPABILITIES": 0x13}.get(name, V11 if version == V12 else V12)
        raw = bytes([other]) + raw[1:]
    elif kind == "truncated":
        raw = raw[:-1]
    elif kind == "extra byte":
        raw = raw + b"\x00"
    err = error_of(s.send(raw))
    assert err.code == code, f"{kind} {name} in {state}: {err.code!r}, DSP0274 names {code!r}"
    negotiated = state in ("capabilities", "negotiated", "handshake", "session")  # version fixed by CAPABILITIES
    assert err.version == (version if negotiated and name != "GET_VERSION" else V10)
    # the responder kept its state: the request that belongs there still succeeds
    if state != "session":
        good = s.request(HOME_NEXT[state])
        assert s.send(good)[1] == RESPONSE[HOME_NEXT[state]]


HOME_NEXT = {"start": "GET_VERSION", "version": "GET_CAPABILITIES", "capabilities": "NEGOTIATE_ALGORITHMS",
             "negotiated": "GET_MEASUREMENTS", "handshake": "FINISH"}


@pytest.mark.parametrize("code", [0x01, 0x7F, 0x85, 0xE6, 0xE8, 0xEC, 0xFE, 0xFF])
def test_unsupported_request(device, manufacturer, code):
    """A response code sent as a request, or a request this model does not implement:
    UnsupportedRequest with the code as ErrorData."""
    s = Session(device, manufacturer.root, V12, "negotiated")
    err = error_of(s.send(bytes([V12, code, 0, 0])))
    assert (err.code, err.data) == (ErrorCode.UNSUPPORTED_REQUEST, code)


@pytest.mark.parametrize("raw", [b"", b"\x12", b"\x12\xe0", b"\x12\xe0\x01"])
def test_short_header(device, manufacturer, raw):
    s = Session(device, manufacturer.root, V12, "negotiated")
    assert error_of(s.send(raw)).code == ErrorCode.INVALID_REQUEST


@pytest.mark.parametrize("name", ["GET_DIGESTS", "GET_CERTIFICATE", "CHALLENGE", "GET_MEASUREMENTS"])
def test_replay_answered_afresh(device, manufacturer, name):
    """Replays of requests the state allows again are answered anew; signed answers carry
    a new responder nonce, so the two answers differ."""
    s = Session(device, manufacturer.root, V12, "negotiated")
    raw = s.request(name)
    first, second = s.send(raw), s.send(raw)
    assert first[1] == second[1] == RESPONSE[name]
    assert (first != second) == (name in ("CHALLENGE", "GET_MEASUREMENTS"))


@pytest.mark.parametrize("bad, code", [
    (lambda v: GetCertificate(v, 1, 0, 16).encode(), ErrorCode.INVALID_REQUEST),        # empty slot
    (lambda v: GetCertificate(v, 0, 0xFFF0, 16).encode(), ErrorCode.INVALID_REQUEST),   # offset past the chain
    (lambda v: Challenge(v, 3, 0, bytes(32)).encode(), ErrorCode.INVALID_REQUEST),
    (lambda v: Challenge(v, 0, 7, bytes(32)).encode(), ErrorCode.INVALID_REQUEST),      # summary type
    (lambda v: GetMeasurements(v, False, 65).encode(), ErrorCode.INVALID_REQUEST),      # no index 65
    (lambda v: KeyExchange(v, 0, 0, 1, bytes(32), bytes(96)).encode(), ErrorCode.INVALID_REQUEST),  # not a point
])
def test_bad_field(device, manufacturer, bad, code):
    s = Session(device, manufacturer.root, V12, "negotiated")
    assert error_of(s.send(bad(V12))).code == code


def test_finish_bad_verify_data(device, manufacturer):
    """RequesterVerifyData wrong: DecryptError, the handshake is dropped (the right
    FINISH afterwards is UnexpectedRequest) and no session keys exist."""
    s = Session(device, manufacturer.root, V12, "handshake")
    good = s.finish_bytes
    bad = good[:-1] + bytes([good[-1] ^ 1])
    assert error_of(s.send(bad)).code == ErrorCode.DECRYPT_ERROR
    assert error_of(s.send(good)).code == ErrorCode.UNEXPECTED_REQUEST
    assert s.responder.session_keys is None


def test_algorithms_without_h100_set(device, manufacturer):
    s = Session(device, manufacturer.root, V12, "capabilities")
    raw = NegotiateAlgorithms(V12, 1, 0, BaseAsym.ECDSA_P256, BaseHash.SHA_256,
                              (AlgStruct(AlgType.DHE, 1 << 3),)).encode()
    assert error_of(s.send(raw)).code == ErrorCode.INVALID_REQUEST


def test_get_version_resets_connection(device, manufacturer):
    """GET_VERSION in any state starts a new connection: GET_CAPABILITIES is then the
    right next request, and a session set up before stays counted (no second session
    without an FLR: SessionLimitExceeded), while after reset() one can be set up again."""
    s = Session(device, manufacturer.root, V12, "session")
    assert s.send(GetVersion().encode())[1] == ResponseCode.VERSION
    assert s.send(s.request("GET_CAPABILITIES"))[1] == ResponseCode.CAPABILITIES
    assert s.send(s.request("NEGOTIATE_ALGORITHMS"))[1] == ResponseCode.ALGORITHMS
    assert error_of(s.send(s.request("KEY_EXCHANGE"))).code == ErrorCode.SESSION_LIMIT_EXCEEDED
    s.responder.reset()
    assert Requester(s.responder.handle, manufacturer.root).run().keys == s.responder.session_keys


@pytest.mark.parametrize("values, counts", [
    ([bytes(48)] * 63, None), ([bytes(47)] * 64, None), ([bytes(48)] * 64, [0] * 63), ([bytes(48)] * 64, [-1] * 64)])
def test_rts_fault_is_unspecified(device, manufacturer, values, counts):
    """An RTS read that does not give 64 values of 48 bytes (or 64 extend counts that fit
    32 bits): ERROR Unspecified, no report."""
    responder = Responder(device, lambda: values, extend_counts=None if counts is None else lambda: counts)
    requester = Requester(responder.handle, manufacturer.root)
    requester.negotiate()
    raw = GetMeasurements(requester.version, False, 0xFF).encode()
    assert error_of(responder.handle(raw)).code == ErrorCode.UNSPECIFIED
