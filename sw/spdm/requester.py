"""The CVM driver's SPDM requester.

:meth:`Requester.run` performs the whole sequence against a transport (``bytes ->
bytes``, e.g. :meth:`sw.spdm.responder.Responder.handle`):

    GET_VERSION, GET_CAPABILITIES, NEGOTIATE_ALGORITHMS (H100's set), GET_DIGESTS,
    GET_CERTIFICATE (chunked), CHALLENGE, GET_MEASUREMENTS (all, signed),
    KEY_EXCHANGE (ephemeral secp384r1), FINISH

and checks everything the responder sends: the negotiated version and algorithms are
ones it offered; the certificate chain links root → … → leaf with CA constraints, its
root is the trusted root (and RootHash its hash), DIGESTS is its hash; CHALLENGE_AUTH,
MEASUREMENTS and KEY_EXCHANGE_RSP signatures verify under the leaf's key over the
transcript the requester kept itself; CHALLENGE_AUTH's nonce is fresh and its
measurement summary hash is the hash of the reported blocks; ResponderVerifyData is the
HMAC the key schedule predicts. It raises a :class:`~sw.spdm.errors.VerificationError`
subclass on any mismatch, :class:`~sw.spdm.errors.ErrorResponseError` when the responder
answers ERROR, :class:`~sw.spdm.errors.ProtocolError` on a response of the wrong kind.

The result, :class:`SessionResult`, holds the session keys (request and response
direction, 32-byte AES-256-GCM key and 12-byte IV each) and the signed report (the
GET_MEASUREMENTS request and MEASUREMENTS response bytes, NVIDIA's "attestation report").
"""
import dataclasses
import hashlib
import os

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from . import keys as ks
from .errors import (
    ChainError,
    ErrorResponseError,
    MeasurementSummaryError,
    NegotiationError,
    NonceError,
    ProtocolError,
    VerifyDataError,
)
from .messages import (
    HASH_SIZE,
    MEAS_ALL,
    MEAS_SPEC_DMTF,
    NONCE_SIZE,
    SUMMARY_ALL,
    SUPPORTED_VERSIONS,
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
    Challenge,
    ChallengeAuth,
    Dhe,
    Digests,
    ErrorResponse,
    Finish,
    FinishRsp,
    GetCapabilities,
    GetCertificate,
    GetDigests,
    GetMeasurements,
    GetVersion,
    KeyExchange,
    KeyExchangeRsp,
    KeySchedule,
    MeasurementHash,
    Measurements,
    NegotiateAlgorithms,
    Version,
    decode_cert_chain,
    decode_response,
    version_byte,
)
from .responder import summary_hash
from .signing import CHALLENGE_AUTH_CONTEXT, KEY_EXCHANGE_RSP_CONTEXT, MEASUREMENTS_CONTEXT, verify

__all__ = ["Requester", "SessionResult", "REQUESTER_CAPS", "verify_chain"]

REQUESTER_CAPS = Cap.CERT | Cap.CHAL | Cap.ENCRYPT | Cap.MAC | Cap.KEY_EX
CERT_CHUNK = 0x400


@dataclasses.dataclass(frozen=True)
class SessionResult:
    """What the requester holds after :meth:`Requester.run`."""
    version: int
    certificates: tuple          # x509.Certificate, root first
    measurements: tuple          # MeasurementBlock, index 1..64
    opaque: bytes                # MEASUREMENTS opaque data
    report_request: bytes        # GET_MEASUREMENTS as sent
    report_response: bytes       # MEASUREMENTS as received (signed)
    session_id: int
    keys: ks.SessionKeys
    messages: int                # requests sent
    bytes_exchanged: int         # request + response bytes


def verify_chain(chain: bytes, trusted_root: x509.Certificate):
    """Parse and check an SPDM certificate chain; return its certificates, root first."""
    try:
        root_hash, ders = decode_cert_chain(chain)
    except Exception as e:  # noqa: BLE001 - any parse failure is a chain failure
        raise ChainError(f"certificate chain does not parse: {e}") from None
    try:
        certs = [x509.load_der_x509_certificate(d) for d in ders]
    except (ValueError, x509.InvalidVersion) as e:
        raise ChainError(f"a certificate does not parse: {e}") from None
    trusted = trusted_root.public_bytes(serialization.Encoding.DER)
    if ders[0] != trusted:
        raise ChainError("the chain's first certificate is not the trusted root")
    if root_hash != hashlib.sha384(trusted).digest():
        raise ChainError("RootHash is not the hash of the root certificate")
    for i, cert in enumerate(certs):
        issuer = certs[max(i - 1, 0)]
        if cert.issuer != issuer.subject:
            raise ChainError(f"certificate {i}: issuer is not certificate {max(i - 1, 0)}'s subject")
        try:
            issuer.public_key().verify(cert.signature, cert.tbs_certificate_bytes,
                                       ec.ECDSA(cert.signature_hash_algorithm))
        except (InvalidSignature, TypeError, AttributeError):
            raise ChainError(f"certificate {i}: signature does not verify under its issuer's key") from None
        try:
            ca = cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
        except x509.ExtensionNotFound:
            ca = False
        if ca != (i < len(certs) - 1):
            raise ChainError(f"certificate {i}: CA flag {ca} does not fit its place in the chain")
    leaf_key = certs[-1].public_key()
    if not isinstance(leaf_key, ec.EllipticCurvePublicKey) or leaf_key.curve.name != "secp384r1":
        raise ChainError("the leaf key is not ECDSA P-384")
    return certs


class Requester:
    """The CVM driver. *transport*: ``bytes -> bytes``. *trusted_root*: the device maker's
    root certificate. *versions*: versions it offers (the highest common one is chosen).
    *rng*: ``n -> n random bytes`` (nonces, session id). *dhe_keygen*: makes the ephemeral
    secp384r1 key of KEY_EXCHANGE (a test passes its own to recompute the secret)."""

    def __init__(self, transport, trusted_root, *, versions=SUPPORTED_VERSIONS, rng=os.urandom,
                 dhe_keygen=None):
        if not callable(transport):
            raise TypeError("transport must be a callable bytes -> bytes")
        if not isinstance(trusted_root, x509.Certificate):
            raise TypeError("trusted_root must be an x509.Certificate")
        versions = tuple(versions)
        if not versions or any(v not in SUPPORTED_VERSIONS for v in versions):
            raise ValueError(f"versions must be a non-empty subset of {SUPPORTED_VERSIONS}")
        self._transport = transport
        self._root = trusted_root
        self.versions = versions
        self._rng = rng
        self._dhe_keygen = dhe_keygen or (lambda: ec.generate_private_key(ec.SECP384R1()))
        if not callable(self._rng) or not callable(self._dhe_keygen):
            raise TypeError("rng and dhe_keygen must be callables")
        self.messages = 0
        self.bytes_exchanged = 0
        self.report = self.challenge_summary = self.ke_summary = None

    def _exchange(self, request, expected_type):
        raw_req = request.encode()
        raw_rsp = self._transport(raw_req)
        self.messages += 1
        self.bytes_exchanged += len(raw_req) + len(raw_rsp)
        rsp = decode_response(raw_rsp, request=request)
        if isinstance(rsp, ErrorResponse):
            raise ErrorResponseError(rsp.code, rsp.data)
        if not isinstance(rsp, expected_type):
            raise ProtocolError(f"{type(request).__name__} answered by {type(rsp).__name__}")
        if expected_type is not Version and rsp.version != self.version:
            raise ProtocolError(f"response at version 0x{rsp.version:02x}, negotiated 0x{self.version:02x}")
        return raw_req, raw_rsp, rsp

    # --- the sequence ------------------------------------------------------------------

    def negotiate(self):
        self.version = None
        req, rsp, version = self._exchange(GetVersion(), Version)
        self.vca = req + rsp
        common = {version_byte(e) for e in version.entries} & set(self.versions)
        if not common:
            raise NegotiationError("no common SPDM version")
        self.version = max(common)
        dts = 0x1200 if self.version >= V12 else 0
        req, rsp, caps = self._exchange(GetCapabilities(self.version, 12, int(REQUESTER_CAPS), dts, dts),
                                        Capabilities)
        self.vca += req + rsp
        need = Cap.CERT | Cap.CHAL | Cap.MEAS_SIG | Cap.KEY_EX | Cap.ENCRYPT | Cap.MAC
        if caps.flags & need != need:
            raise NegotiationError(f"responder capabilities 0x{caps.flags:x} lack 0x{need & ~caps.flags:x}")
        structs = (AlgStruct(AlgType.DHE, Dhe.SECP384R1), AlgStruct(AlgType.AEAD, Aead.AES_256_GCM),
                   AlgStruct(AlgType.REQ_BASE_ASYM, BaseAsym.ECDSA_P384),
                   AlgStruct(AlgType.KEY_SCHEDULE, KeySchedule.SPDM))
        request = NegotiateAlgorithms(self.version, MEAS_SPEC_DMTF, 0, BaseAsym.ECDSA_P384, BaseHash.SHA_384, structs)
        req, rsp, algs = self._exchange(request, Algorithms)
        self.vca += req + rsp
        selected = {s.alg_type: s.supported for s in algs.alg_structs}
        if (algs.base_asym != BaseAsym.ECDSA_P384 or algs.base_hash != BaseHash.SHA_384
                or algs.measurement_hash != MeasurementHash.SHA_384 or algs.measurement_spec != MEAS_SPEC_DMTF
                or selected.get(AlgType.DHE) != Dhe.SECP384R1 or selected.get(AlgType.AEAD) != Aead.AES_256_GCM
                or selected.get(AlgType.KEY_SCHEDULE) != KeySchedule.SPDM
                or selected.get(AlgType.REQ_BASE_ASYM, 0) not in (0, BaseAsym.ECDSA_P384)):
            raise NegotiationError(f"ALGORITHMS selects a set outside H100's: {algs}")

    def fetch_certificates(self):
        req, rsp, digests = self._exchange(GetDigests(self.version), Digests)
        self.message_b = req + rsp
        if not digests.slot_mask & 1:
            raise ChainError("slot 0 holds no certificate chain")
        chain, offset = b"", 0
        while True:
            req, rsp, cert = self._exchange(GetCertificate(self.version, 0, offset, CERT_CHUNK), Certificate)
            self.message_b += req + rsp
            if not cert.portion:
                raise ProtocolError("CERTIFICATE with an empty portion")
            chain += cert.portion
            offset += len(cert.portion)
            if cert.remainder_length == 0:
                break
            if offset > 0xFFFF:
                raise ChainError("certificate chain longer than its 16-bit Length field allows")
        self.chain = chain
        self.chain_hash = hashlib.sha384(chain).digest()
        if digests.digests[0] != self.chain_hash:
            raise ChainError("DIGESTS slot 0 is not the hash of the chain CERTIFICATE returned")
        self.certificates = verify_chain(chain, self._root)
        self.leaf_key = self.certificates[-1].public_key()

    def challenge(self):
        nonce = self._rng(NONCE_SIZE)
        request = Challenge(self.version, 0, SUMMARY_ALL, nonce)
        req, rsp, auth = self._exchange(request, ChallengeAuth)
        if auth.cert_chain_hash != self.chain_hash:
            raise ChainError("CHALLENGE_AUTH names another certificate chain")
        if auth.nonce == nonce:
            raise NonceError("CHALLENGE_AUTH's nonce is the requester's own: not fresh")
        transcript = self.vca + self.message_b + req + rsp[:-len(auth.signature)]
        verify(self.leaf_key, self.version, CHALLENGE_AUTH_CONTEXT, transcript, auth.signature)
        self.message_b = b""
        self.challenge_summary = auth.summary_hash

    def get_measurements(self):
        nonce = self._rng(NONCE_SIZE)
        request = GetMeasurements(self.version, True, MEAS_ALL, nonce)
        req, rsp, meas = self._exchange(request, Measurements)
        transcript = (self.vca if self.version >= V12 else b"") + req + rsp[:-len(meas.signature)]
        verify(self.leaf_key, self.version, MEASUREMENTS_CONTEXT, transcript, meas.signature)
        if [b.index for b in meas.blocks] != list(range(1, len(meas.blocks) + 1)):
            raise MeasurementSummaryError("measurement blocks are not indices 1..n in order")
        self.report = (req, rsp, meas)
        self._check_summaries()

    def _check_summaries(self):
        """Every summary hash signed so far (CHALLENGE_AUTH, KEY_EXCHANGE_RSP) against the
        blocks MEASUREMENTS reported; called when either side of the comparison arrives."""
        if self.report is None:
            return
        actual = summary_hash(self.report[2].blocks)
        for name, signed in (("CHALLENGE_AUTH", self.challenge_summary), ("KEY_EXCHANGE_RSP", self.ke_summary)):
            if signed is not None and signed != actual:
                raise MeasurementSummaryError(f"{name}'s summary hash is not that of the reported blocks")

    def key_exchange(self):
        ephemeral = self._dhe_keygen()
        point = ephemeral.public_key().public_bytes(serialization.Encoding.X962,
                                                    serialization.PublicFormat.UncompressedPoint)[1:]
        req_session_id = int.from_bytes(self._rng(2), "little")
        request = KeyExchange(self.version, SUMMARY_ALL, 0, req_session_id, self._rng(32), point)
        req, rsp, ke = self._exchange(request, KeyExchangeRsp)
        if ke.mut_auth_requested:
            raise NegotiationError("the responder asks for mutual authentication, which is not modelled")
        unsigned = rsp[:-(len(ke.signature) + HASH_SIZE)]
        prefix = self.vca + self.chain_hash + req + unsigned
        verify(self.leaf_key, self.version, KEY_EXCHANGE_RSP_CONTEXT, prefix, ke.signature)
        try:
            peer = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP384R1(), b"\x04" + ke.exchange)
        except ValueError:
            raise VerifyDataError("KEY_EXCHANGE_RSP's DHE point is not on secp384r1") from None
        secret = ephemeral.exchange(ec.ECDH(), peer)
        th1 = hashlib.sha384(prefix + ke.signature).digest()
        self.handshake = ks.handshake_keys(self.version, secret, th1)
        if ks.hmac384(self.handshake.response_finished_key, th1) != ke.verify_data:
            raise VerifyDataError("ResponderVerifyData does not match the key schedule")
        self.transcript_k = prefix + ke.signature + ke.verify_data
        self.ke_summary = ke.summary_hash
        self._check_summaries()
        self.session_id = (req_session_id << 16) | ke.rsp_session_id

    def finish(self):
        header = Finish(self.version, bytes(HASH_SIZE)).header()
        verify_data = ks.hmac384(self.handshake.request_finished_key,
                                 hashlib.sha384(self.transcript_k + header).digest())
        req, rsp, _ = self._exchange(Finish(self.version, verify_data), FinishRsp)
        th2 = hashlib.sha384(self.transcript_k + req + rsp).digest()
        self.keys = ks.data_keys(self.version, self.handshake, th2)

    def run(self, *, h100_order=False) -> SessionResult:
        """The whole sequence. Default: CHALLENGE and GET_MEASUREMENTS before the session.
        *h100_order*: the order NVIDIA's driver uses (its GH100 responder has no CHAL_CAP;
        the report is fetched after the session is set up): negotiation, certificates,
        KEY_EXCHANGE, FINISH, GET_MEASUREMENTS."""
        self.report = self.challenge_summary = self.ke_summary = None
        self.negotiate()
        self.fetch_certificates()
        if h100_order:
            self.key_exchange()
            self.finish()
            self.get_measurements()
        else:
            self.challenge()
            self.get_measurements()
            self.key_exchange()
            self.finish()
        req, rsp, meas = self.report
        return SessionResult(self.version, tuple(self.certificates), meas.blocks, meas.opaque, req, rsp,
                             self.session_id, self.keys, self.messages, self.bytes_exchanged)
