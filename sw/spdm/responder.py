"""The GPU firmware's SPDM responder (the RTR: root of trust for reporting).

It holds the device identity (:class:`~sw.spdm.identity.DeviceIdentity`), reads the
measurements through a small interface — a callable returning the RTS's 64 slot values,
48 bytes each (the RTS model can pass its own read method) — and answers requests in the
order DSP0274's connection state machine allows:

    GET_VERSION → GET_CAPABILITIES → NEGOTIATE_ALGORITHMS → then any of GET_DIGESTS,
    GET_CERTIFICATE, CHALLENGE, GET_MEASUREMENTS, KEY_EXCHANGE → FINISH

Errors it answers with (never an exception: :meth:`Responder.handle` returns bytes for
any input):

- an unknown or unimplemented request code: ``UnsupportedRequest`` (ErrorData = the code);
- GET_VERSION not at SPDMVersion 0x10, GET_CAPABILITIES at a version the responder did
  not offer, any later request not at the negotiated version: ``VersionMismatch``;
- a request the state does not allow (before its predecessors, a second
  GET_CAPABILITIES / NEGOTIATE_ALGORITHMS, FINISH without a KEY_EXCHANGE, a second
  KEY_EXCHANGE while one is open): ``UnexpectedRequest``;
- a KEY_EXCHANGE after this reset's session was set up (H100 does not let a session be
  set up again without an FLR): ``SessionLimitExceeded``;
- bytes that do not parse (short, long, bad lengths), or a field the responder cannot
  honour (slot other than 0, an index past 64, a DHE point not on the curve, an
  algorithm set without H100's): ``InvalidRequest``;
- FINISH whose RequesterVerifyData does not match: ``DecryptError``, and the handshake
  is dropped.

Replays of GET_DIGESTS, GET_CERTIFICATE, CHALLENGE and GET_MEASUREMENTS are answered
afresh: every signed answer carries a new responder nonce and covers the requester's
nonce, so a replayed request earns no reusable evidence.

Transcripts (DSP0274 1.2; 1.1 differences in brackets): VCA = GET_VERSION … ALGORITHMS;
M1 = VCA || GET_DIGESTS/DIGESTS/GET_CERTIFICATE/CERTIFICATE since the last CHALLENGE_AUTH
|| CHALLENGE || CHALLENGE_AUTH without its signature; L1 = VCA [1.1: no VCA] || the
GET_MEASUREMENTS/MEASUREMENTS pairs since the last signed one (any other request empties
it); KEY_EXCHANGE_RSP signs VCA || Hash(cert chain) || KEY_EXCHANGE || KEY_EXCHANGE_RSP up
to its signature; TH1 adds the signature; TH2 = VCA || Hash(cert chain) || KEY_EXCHANGE
|| KEY_EXCHANGE_RSP || FINISH || FINISH_RSP.
"""
import hashlib
import os
import struct

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from . import keys as ks
from .errors import MalformedMessageError, UnknownCodeError
from .identity import DeviceIdentity
from .messages import (
    HASH_SIZE,
    MEAS_ALL,
    MEAS_COUNT,
    MEAS_SPEC_DMTF,
    NONCE_SIZE,
    SUMMARY_ALL,
    SUMMARY_NONE,
    SUMMARY_TCB,
    SUPPORTED_VERSIONS,
    V10,
    V12,
    Aead,
    Algorithms,
    AlgStruct,
    AlgType,
    BaseAsym,
    BaseHash,
    Cap,
    Capabilities,
    Certificate,
    ChallengeAuth,
    Dhe,
    Digests,
    ErrorCode,
    ErrorResponse,
    FinishRsp,
    KeyExchangeRsp,
    KeySchedule,
    MeasurementBlock,
    MeasurementHash,
    Measurements,
    RequestCode,
    Version,
    decode_request,
    version_entry,
)
from .opaque import OpaqueField, encode_opaque
from .signing import CHALLENGE_AUTH_CONTEXT, KEY_EXCHANGE_RSP_CONTEXT, MEASUREMENTS_CONTEXT, sign

__all__ = ["Responder", "RESPONDER_CAPS", "SLOTS", "MAX_PORTION", "SpdmRequestError", "default_opaque_fields",
           "measurement_blocks", "summary_hash"]

SLOTS = 64
MAX_PORTION = 1024  # CERTIFICATE portions are at most this long (chunked reads are exercised)
RESPONDER_CAPS = Cap.CERT | Cap.CHAL | Cap.MEAS_SIG | Cap.MEAS_FRESH | Cap.ENCRYPT | Cap.MAC | Cap.KEY_EX
MIN_DATA_TRANSFER_SIZE = 42  # DSP0274 1.2 MinDataTransferSize
DMTF_MUTABLE_FIRMWARE = 0x01  # DMTFSpecMeasurementValueType of every slot (as in NVIDIA's sample H100 report)


class SpdmRequestError(Exception):
    """Internal: abort a request with this ERROR code (never escapes :meth:`Responder.handle`)."""

    def __init__(self, code, data=0):
        super().__init__(code)
        self.code, self.data = code, data


def measurement_blocks(values) -> list:
    """The 64 DMTF measurement blocks (index i + 1 for RTS slot i) of *values*."""
    values = list(values)
    if len(values) != SLOTS or any(not isinstance(v, bytes) or len(v) != HASH_SIZE for v in values):
        raise ValueError(f"the RTS must give {SLOTS} values of {HASH_SIZE} bytes")
    return [MeasurementBlock.dmtf(i + 1, DMTF_MUTABLE_FIRMWARE, v) for i, v in enumerate(values)]


def summary_hash(blocks) -> bytes:
    """MeasurementSummaryHash: SHA-384 of the concatenated measurement blocks. Every RTS
    slot counts as a TCB component, so the TCB and the all-measurements summaries are the
    same hash (a decision of this model)."""
    return hashlib.sha384(b"".join(b.encode() for b in blocks)).digest()


def default_opaque_fields(counts=None):
    """The fields of NVIDIA's sample H100 report, with this model's values. *counts*: the
    number of extends of each of the 64 slots (OPAQUE_FIELD_ID_MSRSCNT), zero if unknown."""
    counts = list(counts) if counts is not None else [0] * SLOTS
    return [
        (OpaqueField.VBIOS_VERSION, bytes.fromhex("009f009601000000")),
        (OpaqueField.BOARD_ID, struct.pack("<I", 0x3B1)),
        (OpaqueField.CHIP_SKU, b"882\0\0\0\0\0\0"),
        (OpaqueField.CHIP_SKU_MOD, b"0\0\0\0\0"),
        (OpaqueField.PROJECT, b"1010\0"),
        (OpaqueField.PROJECT_SKU, b"0200\0"),
        (OpaqueField.PROJECT_SKU_MOD, b"\0\0"),
        (OpaqueField.DRIVER_VERSION, b"550.90.07\0"),
        (OpaqueField.GPU_INFO, bytes.fromhex("8001000000000000")),
        (OpaqueField.MSRSCNT, b"".join(struct.pack("<I", c) for c in counts)),
        (OpaqueField.CPRINFO, bytes.fromhex("00c00100")),
        (OpaqueField.NVDEC0_STATUS, b"\x55"),
        (OpaqueField.FWID, bytes(48)),
        (OpaqueField.PROTECTED_PCIE_STATUS, b"\x55"),
    ]


class Responder:
    """The GPU firmware's SPDM responder.

    *identity*: the device's keys and certificates. *measurements*: a callable returning
    the RTS's 64 slot values (48 bytes each), read afresh for every MEASUREMENTS,
    CHALLENGE_AUTH and KEY_EXCHANGE_RSP. *extend_counts*: optional callable returning the
    64 slots' extend counts (reported in the opaque data). *versions*: the SPDM versions
    VERSION offers (1.1 and 1.2). *rng*: ``n -> n random bytes`` for nonces, random data
    and session ids (the ephemeral DHE key always comes from ``cryptography``'s generator).
    """

    def __init__(self, identity, measurements, *, extend_counts=None, versions=SUPPORTED_VERSIONS, rng=os.urandom):
        if not isinstance(identity, DeviceIdentity):
            raise TypeError("identity must be a DeviceIdentity")
        if not callable(measurements):
            raise TypeError("measurements must be a callable returning the 64 slot values")
        if extend_counts is not None and not callable(extend_counts):
            raise TypeError("extend_counts must be a callable or None")
        versions = tuple(versions)
        if not versions or any(v not in SUPPORTED_VERSIONS for v in versions):
            raise ValueError(f"versions must be a non-empty subset of {SUPPORTED_VERSIONS}")
        if not callable(rng):
            raise TypeError("rng must be a callable")
        self.identity = identity
        self._measurements = measurements
        self._counts = extend_counts
        self.versions = versions
        self._rng = rng
        self._chain = identity.cert_chain()
        self._chain_hash = hashlib.sha384(self._chain).digest()
        self.session_keys = None
        self._sessions_set_up = 0
        self.reset()

    # --- state -------------------------------------------------------------------------

    def reset(self):
        """Cold reset / FLR: forget the connection, the session and its keys."""
        self._state = "start"
        self._version = None
        self._vca = b""
        self._message_b = b""
        self._message_m = b""
        self._handshake = None
        self.session_keys = None
        self._sessions_set_up = 0

    @property
    def version(self):
        """The negotiated SPDM version byte (None before GET_CAPABILITIES)."""
        return self._version

    # --- entry point -------------------------------------------------------------------

    def handle(self, request: bytes) -> bytes:
        """Answer one request message; always returns a response message."""
        if not isinstance(request, (bytes, bytearray)):
            raise TypeError("a request is bytes")
        request = bytes(request)
        try:
            self._check_header(request)
            try:
                msg = decode_request(request)
            except UnknownCodeError:
                raise SpdmRequestError(ErrorCode.UNSUPPORTED_REQUEST, request[1]) from None
            except MalformedMessageError:
                raise SpdmRequestError(ErrorCode.INVALID_REQUEST) from None
            handler = getattr(self, "_on_" + RequestCode(request[1]).name.lower())
            return handler(msg, request)
        except SpdmRequestError as e:
            version = V10 if self._version is None or request[1:2] == bytes((RequestCode.GET_VERSION,)) \
                else self._version
            return ErrorResponse(version, e.code, e.data).encode()

    def _check_header(self, request):
        if len(request) < 4:
            raise SpdmRequestError(ErrorCode.INVALID_REQUEST)
        version, code = request[0], request[1]
        implemented = {RequestCode.GET_VERSION, RequestCode.GET_CAPABILITIES, RequestCode.NEGOTIATE_ALGORITHMS,
                       RequestCode.GET_DIGESTS, RequestCode.GET_CERTIFICATE, RequestCode.CHALLENGE,
                       RequestCode.GET_MEASUREMENTS, RequestCode.KEY_EXCHANGE, RequestCode.FINISH}
        if code not in implemented:
            raise SpdmRequestError(ErrorCode.UNSUPPORTED_REQUEST, code)
        if code == RequestCode.GET_VERSION:
            if version != V10:
                raise SpdmRequestError(ErrorCode.VERSION_MISMATCH)
        elif code == RequestCode.GET_CAPABILITIES and self._state == "version":
            if version not in self.versions:
                raise SpdmRequestError(ErrorCode.VERSION_MISMATCH)
        elif self._version is not None and version != self._version:
            raise SpdmRequestError(ErrorCode.VERSION_MISMATCH)

    def _expect(self, *states):
        if self._state not in states:
            raise SpdmRequestError(ErrorCode.UNEXPECTED_REQUEST)

    # --- negotiation -------------------------------------------------------------------

    def _on_get_version(self, msg, raw):
        self.reset_connection()
        rsp = Version(tuple(version_entry(v) for v in self.versions)).encode()
        self._vca = raw + rsp
        self._state = "version"
        return rsp

    def reset_connection(self):
        """GET_VERSION: a new connection; an open handshake is dropped. A session already
        set up stays counted: a new one needs an FLR (:meth:`reset`)."""
        self._state = "start"
        self._version = None
        self._vca = self._message_b = self._message_m = b""
        self._handshake = None

    def _on_get_capabilities(self, msg, raw):
        self._expect("version")
        if msg.version >= V12 and (msg.data_transfer_size < MIN_DATA_TRANSFER_SIZE
                                   or msg.data_transfer_size > msg.max_spdm_msg_size):
            raise SpdmRequestError(ErrorCode.INVALID_REQUEST)
        self._version = msg.version
        dts = 0x1200 if msg.version >= V12 else 0
        rsp = Capabilities(msg.version, 12, int(RESPONDER_CAPS), dts, dts).encode()
        self._vca += raw + rsp
        self._state = "capabilities"
        return rsp

    def _on_negotiate_algorithms(self, msg, raw):
        self._expect("capabilities")
        types = [s.alg_type for s in msg.alg_structs]
        if types != sorted(set(types)) or any(t not in AlgType.__members__.values() for t in types):
            raise SpdmRequestError(ErrorCode.INVALID_REQUEST)
        offered = {s.alg_type: s.supported for s in msg.alg_structs}
        needed = {AlgType.DHE: Dhe.SECP384R1, AlgType.AEAD: Aead.AES_256_GCM, AlgType.KEY_SCHEDULE: KeySchedule.SPDM}
        if (not msg.base_asym & BaseAsym.ECDSA_P384 or not msg.base_hash & BaseHash.SHA_384
                or not msg.measurement_spec & MEAS_SPEC_DMTF
                or any(not offered.get(t, 0) & bit for t, bit in needed.items())):
            raise SpdmRequestError(ErrorCode.INVALID_REQUEST)
        selected = {**{t: int(b) for t, b in needed.items()}, AlgType.REQ_BASE_ASYM: 0}
        structs = tuple(AlgStruct(t, selected[t]) for t in types)
        other = msg.other_params & 0x1 if msg.version >= V12 else 0
        rsp = Algorithms(msg.version, MEAS_SPEC_DMTF, other, MeasurementHash.SHA_384, BaseAsym.ECDSA_P384,
                         BaseHash.SHA_384, structs).encode()
        self._vca += raw + rsp
        self._state = "negotiated"
        return rsp

    # --- certificates and challenge ----------------------------------------------------

    def _on_get_digests(self, msg, raw):
        self._expect("negotiated")
        self._message_m = b""
        rsp = Digests(self._version, 0x01, (self._chain_hash,)).encode()
        self._message_b += raw + rsp
        return rsp

    def _on_get_certificate(self, msg, raw):
        self._expect("negotiated")
        self._message_m = b""
        if msg.slot != 0 or msg.offset >= len(self._chain) or msg.length == 0:
            raise SpdmRequestError(ErrorCode.INVALID_REQUEST)
        n = min(msg.length, MAX_PORTION, len(self._chain) - msg.offset)
        rsp = Certificate(self._version, 0, self._chain[msg.offset:msg.offset + n],
                          len(self._chain) - msg.offset - n).encode()
        self._message_b += raw + rsp
        return rsp

    def _summary(self, summary_type):
        if summary_type == SUMMARY_NONE:
            return b""
        if summary_type in (SUMMARY_TCB, SUMMARY_ALL):
            return summary_hash(self._blocks())
        raise SpdmRequestError(ErrorCode.INVALID_REQUEST)

    def _on_challenge(self, msg, raw):
        self._expect("negotiated")
        self._message_m = b""
        if msg.slot != 0:
            raise SpdmRequestError(ErrorCode.INVALID_REQUEST)
        summary = self._summary(msg.summary_type)
        unsigned = ChallengeAuth(self._version, 0, 0x01, self._chain_hash, self._rng(NONCE_SIZE), summary, b"",
                                 bytes(96))
        body = unsigned.encode_unsigned()
        transcript = self._vca + self._message_b + raw + body
        self._message_b = b""
        return body + sign(self.identity.attestation_key, self._version, CHALLENGE_AUTH_CONTEXT, transcript)

    # --- measurements ------------------------------------------------------------------

    def _blocks(self):
        try:
            return measurement_blocks(self._measurements())
        except ValueError:
            raise SpdmRequestError(ErrorCode.UNSPECIFIED) from None

    def _opaque(self):
        counts = self._counts() if self._counts is not None else None
        if counts is not None:
            counts = list(counts)
            if len(counts) != SLOTS or any(not isinstance(c, int) or not 0 <= c < 1 << 32 for c in counts):
                raise SpdmRequestError(ErrorCode.UNSPECIFIED)
        return encode_opaque(default_opaque_fields(counts))

    def _on_get_measurements(self, msg, raw):
        self._expect("negotiated")
        if msg.signed and msg.slot != 0:
            raise SpdmRequestError(ErrorCode.INVALID_REQUEST)
        if msg.operation == MEAS_COUNT:
            count, blocks = SLOTS, ()
        elif msg.operation == MEAS_ALL:
            count, blocks = 0, tuple(self._blocks())
        elif msg.operation <= SLOTS:
            count, blocks = 0, (self._blocks()[msg.operation - 1],)
        else:
            raise SpdmRequestError(ErrorCode.INVALID_REQUEST)
        body = Measurements(self._version, count, 0, blocks, self._rng(NONCE_SIZE), self._opaque()).encode_unsigned()
        self._message_m += raw + body
        if not msg.signed:
            return body
        transcript = (self._vca if self._version >= V12 else b"") + self._message_m
        self._message_m = b""
        return body + sign(self.identity.attestation_key, self._version, MEASUREMENTS_CONTEXT, transcript)

    # --- session -----------------------------------------------------------------------

    def _on_key_exchange(self, msg, raw):
        self._expect("negotiated")
        self._message_m = b""
        if self._handshake is not None:
            raise SpdmRequestError(ErrorCode.UNEXPECTED_REQUEST)
        if self._sessions_set_up:
            raise SpdmRequestError(ErrorCode.SESSION_LIMIT_EXCEEDED)
        if msg.slot != 0:
            raise SpdmRequestError(ErrorCode.INVALID_REQUEST)
        summary = self._summary(msg.summary_type)
        try:
            peer = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP384R1(), b"\x04" + msg.exchange)
        except ValueError:
            raise SpdmRequestError(ErrorCode.INVALID_REQUEST) from None
        ephemeral = ec.generate_private_key(ec.SECP384R1())
        secret = ephemeral.exchange(ec.ECDH(), peer)
        point = ephemeral.public_key().public_bytes(serialization.Encoding.X962,
                                                    serialization.PublicFormat.UncompressedPoint)[1:]
        rsp_session_id = int.from_bytes(self._rng(2), "little")
        unsigned = KeyExchangeRsp(self._version, rsp_session_id, self._rng(32), point, summary, b"", bytes(96),
                                  bytes(HASH_SIZE)).encode_unsigned()
        prefix = self._vca + self._chain_hash + raw + unsigned
        signature = sign(self.identity.attestation_key, self._version, KEY_EXCHANGE_RSP_CONTEXT, prefix)
        th1 = hashlib.sha384(prefix + signature).digest()
        hs = ks.handshake_keys(self._version, secret, th1)
        verify = ks.hmac384(hs.response_finished_key, th1)
        self._handshake = {"keys": hs, "transcript": prefix + signature + verify,
                           "session_id": (msg.req_session_id << 16) | rsp_session_id}
        return unsigned + signature + verify

    def _on_finish(self, msg, raw):
        self._expect("negotiated")
        self._message_m = b""
        if self._handshake is None:
            raise SpdmRequestError(ErrorCode.UNEXPECTED_REQUEST)
        if msg.signature:  # mutual authentication was not requested
            raise SpdmRequestError(ErrorCode.INVALID_REQUEST)
        hs, transcript = self._handshake["keys"], self._handshake["transcript"]
        expected = ks.hmac384(hs.request_finished_key, hashlib.sha384(transcript + msg.header()).digest())
        if msg.verify_data != expected:
            self._handshake = None
            raise SpdmRequestError(ErrorCode.DECRYPT_ERROR)
        rsp = FinishRsp(self._version).encode()
        th2 = hashlib.sha384(transcript + raw + rsp).digest()
        self.session_keys = ks.data_keys(self._version, hs, th2)
        self.session_id = self._handshake["session_id"]
        self._handshake = None
        self._sessions_set_up += 1
        return rsp
