"""OCSP (RFC 6960) for the device and RIM chains: a responder model and the client check.

:class:`OcspResponder` answers DER ``OCSPRequest`` bytes for the certificates of the CAs
registered with it (:meth:`~OcspResponder.add_issuer`): ``good`` for a certificate it
issued (:meth:`~OcspResponder.add_certificate`), ``revoked`` (time and reason) after
:meth:`~OcspResponder.revoke`, ``unknown`` for a serial number it never saw under a known
issuer, and an unsuccessful ``unauthorized`` response for an issuer it does not serve.
Each CA's responses are signed (ECDSA-SHA-384) by a delegated responder certificate that
CA issued (extended key usage id-kp-OCSPSigning), shipped in the response; the request's
nonce extension is echoed; ``thisUpdate`` is the responder's clock, ``nextUpdate``
*validity* later. The clock is a callable so that tests can answer from the past.

:func:`check_response` is the client side, what the verifier runs for each certificate:
the response is successful and about this certificate (serial number, issuer name and key
hashes); its signer is the issuer itself or a certificate the issuer signed with
id-kp-OCSPSigning, valid at the time of the check; the signature verifies; ``thisUpdate``
≤ now ≤ ``nextUpdate`` and ``thisUpdate`` no older than *max_age*; the nonce, when one
was sent, comes back unchanged. It returns the status (``"good"``, ``"revoked"``,
``"unknown"``) and the revocation reason, and raises :class:`~sw.attest.errors.OcspError`
when the response does not verify. :class:`OcspClient` builds the request (with a fresh
32-byte nonce, as NVIDIA's verifier does unless told not to) and runs both steps.
"""
import dataclasses
import datetime
import hashlib
import os

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509 import ocsp
from cryptography.x509.oid import ExtendedKeyUsageOID

from sw.spdm.identity import derive_key, issue_certificate, model_name

from .certs import der
from .errors import AttestInputError, OcspError

__all__ = ["OcspResponder", "OcspClient", "OcspResult", "check_response", "build_request"]

_HASH = hashes.SHA384()


@dataclasses.dataclass(frozen=True)
class OcspResult:
    status: str                    # "good", "revoked", "unknown"
    reason: str = None             # revocation reason name when revoked
    this_update: datetime.datetime = None
    next_update: datetime.datetime = None


def _utcnow():
    return datetime.datetime.now(datetime.timezone.utc)


class OcspResponder:
    """The OCSP responder of one or more CAs. *clock*: a callable returning an aware
    datetime (``thisUpdate``). *validity*: ``nextUpdate - thisUpdate``."""

    def __init__(self, *, clock=_utcnow, validity=datetime.timedelta(hours=1), seed=b"ocsp"):
        if not callable(clock):
            raise TypeError("clock must be a callable returning a datetime")
        if not isinstance(validity, datetime.timedelta) or validity <= datetime.timedelta(0):
            raise ValueError("validity must be a positive timedelta")
        if not isinstance(seed, bytes):
            raise TypeError("seed must be bytes")
        self.clock, self.validity, self.seed = clock, validity, seed
        self._issuers = {}   # issuer key hash -> (issuer cert, responder cert, responder key)
        self._known = {}     # (issuer key hash, serial) -> certificate
        self._revoked = {}   # (issuer key hash, serial) -> (time, x509.ReasonFlags)
        self.requests = 0

    @staticmethod
    def _key_hash(cert):
        spki = cert.public_key().public_bytes(serialization.Encoding.DER,
                                              serialization.PublicFormat.SubjectPublicKeyInfo)
        # issuerKeyHash hashes the BIT STRING contents of subjectPublicKey: for an EC key the
        # uncompressed point, i.e. the X9.62 encoding.
        point = cert.public_key().public_bytes(serialization.Encoding.X962,
                                               serialization.PublicFormat.UncompressedPoint)
        assert spki.endswith(point)
        return hashlib.sha384(point).digest()

    def add_issuer(self, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey):
        """Serve the certificates *cert* (a CA) issues; its key signs a delegated responder."""
        if not isinstance(cert, x509.Certificate) or not isinstance(key, ec.EllipticCurvePrivateKey):
            raise TypeError("add_issuer takes a certificate and its EC private key")
        cn = cert.subject.get_attributes_for_oid(x509.NameOID.COMMON_NAME)[0].value
        rkey = derive_key(self.seed + b"/responder/" + der(cert))
        rcert = issue_certificate(model_name(f"OCSP responder for {cn}"), rkey, cert.subject, key, ca=False,
                                  ocsp_signing=True)
        self._issuers[self._key_hash(cert)] = (cert, rcert, rkey)

    def add_certificate(self, cert: x509.Certificate, issuer: x509.Certificate):
        if not isinstance(cert, x509.Certificate) or not isinstance(issuer, x509.Certificate):
            raise TypeError("add_certificate takes two certificates")
        kh = self._key_hash(issuer)
        if kh not in self._issuers:
            raise ValueError("add the issuer first (add_issuer)")
        self._known[(kh, cert.serial_number)] = cert

    def add_chain(self, certs_leaf_first, keys_leaf_first=None):
        """Serve a whole chain: every certificate but the root, under its issuer.
        *keys_leaf_first*: the private keys of the issuers (certs[1:])."""
        certs = list(certs_leaf_first)
        for i, (cert, issuer) in enumerate(zip(certs, certs[1:])):
            if keys_leaf_first is not None and self._key_hash(issuer) not in self._issuers:
                self.add_issuer(issuer, keys_leaf_first[i])
            self.add_certificate(cert, issuer)

    def revoke(self, cert: x509.Certificate, issuer: x509.Certificate, *,
               reason=x509.ReasonFlags.key_compromise, when=None):
        key = (self._key_hash(issuer), cert.serial_number)
        if key not in self._known:
            raise ValueError("revoke: certificate not known to this responder")
        self._revoked[key] = (when or self.clock(), reason)

    def respond(self, request_der: bytes) -> bytes:
        """A DER OCSPResponse for a DER OCSPRequest (malformed requests get
        ``malformedRequest``, other issuers ``unauthorized``)."""
        self.requests += 1
        try:
            req = ocsp.load_der_ocsp_request(bytes(request_der))
            serial, kh = req.serial_number, req.issuer_key_hash
            alg = req.hash_algorithm
        except (ValueError, TypeError):
            return ocsp.OCSPResponseBuilder.build_unsuccessful(ocsp.OCSPResponseStatus.MALFORMED_REQUEST).public_bytes(
                serialization.Encoding.DER)
        if not isinstance(alg, hashes.SHA384) or kh not in self._issuers:
            return ocsp.OCSPResponseBuilder.build_unsuccessful(ocsp.OCSPResponseStatus.UNAUTHORIZED).public_bytes(
                serialization.Encoding.DER)
        issuer, rcert, rkey = self._issuers[kh]
        now = self.clock()
        status, rtime, rreason = ocsp.OCSPCertStatus.GOOD, None, None
        if (kh, serial) in self._revoked:
            status = ocsp.OCSPCertStatus.REVOKED
            rtime, rreason = self._revoked[(kh, serial)]
        elif (kh, serial) not in self._known:
            status = ocsp.OCSPCertStatus.UNKNOWN
        builder = ocsp.OCSPResponseBuilder().add_response_by_hash(
            issuer_name_hash=req.issuer_name_hash, issuer_key_hash=kh, serial_number=serial, algorithm=alg,
            cert_status=status, this_update=now, next_update=now + self.validity, revocation_time=rtime,
            revocation_reason=rreason)
        builder = builder.responder_id(ocsp.OCSPResponderEncoding.HASH, rcert).certificates([rcert])
        try:
            nonce = req.extensions.get_extension_for_class(x509.OCSPNonce).value.nonce
            builder = builder.add_extension(x509.OCSPNonce(nonce), critical=False)
        except x509.ExtensionNotFound:
            pass
        return builder.sign(rkey, _HASH).public_bytes(serialization.Encoding.DER)

    __call__ = respond


def build_request(cert, issuer, nonce: bytes = None) -> bytes:
    builder = ocsp.OCSPRequestBuilder().add_certificate(cert, issuer, _HASH)
    if nonce is not None:
        builder = builder.add_extension(x509.OCSPNonce(nonce), critical=False)
    return builder.build().public_bytes(serialization.Encoding.DER)


def _verify_sig(key, signature, data, hash_alg, what):
    if not isinstance(key, ec.EllipticCurvePublicKey):
        raise OcspError(f"{what}: signer key is not ECDSA")
    try:
        key.verify(signature, data, ec.ECDSA(hash_alg))
    except (InvalidSignature, TypeError, ValueError):
        raise OcspError(f"{what}: signature does not verify") from None


def check_response(response_der: bytes, cert: x509.Certificate, issuer: x509.Certificate, *,
                   at: datetime.datetime, nonce: bytes = None,
                   max_age: datetime.timedelta = datetime.timedelta(days=1)) -> OcspResult:
    """Check an OCSP response about *cert* (issued by *issuer*) at time *at*; see the
    module doc. Raises OcspError when it does not verify."""
    if not isinstance(response_der, (bytes, bytearray)):
        raise AttestInputError("an OCSP response is bytes")
    name = cert.subject.rfc4514_string()
    try:
        rsp = ocsp.load_der_ocsp_response(bytes(response_der))
    except ValueError as e:
        raise OcspError(f"OCSP response for {name} does not parse: {e}") from None
    if rsp.response_status != ocsp.OCSPResponseStatus.SUCCESSFUL:
        raise OcspError(f"OCSP response for {name}: {rsp.response_status.name}")
    try:
        singles = list(rsp.responses)
        if len(singles) != 1:
            raise OcspError(f"OCSP response for {name} holds {len(singles)} answers, not one")
        single = singles[0]
        alg = single.hash_algorithm
        if not isinstance(alg, hashes.SHA384):
            raise OcspError(f"OCSP response for {name}: CertID hash is not SHA-384")
        expected = ocsp.OCSPRequestBuilder().add_certificate(cert, issuer, _HASH).build()
        if (single.serial_number != cert.serial_number or single.issuer_key_hash != expected.issuer_key_hash
                or single.issuer_name_hash != expected.issuer_name_hash):
            raise OcspError(f"OCSP response is about another certificate than {name}")
        signers = list(rsp.certificates)
        signer = issuer
        if signers:
            signer = signers[0]
            if der(signer) != der(issuer):
                try:
                    _verify_sig(issuer.public_key(), signer.signature, signer.tbs_certificate_bytes,
                                signer.signature_hash_algorithm, "OCSP signer certificate")
                except OcspError:
                    raise OcspError(f"OCSP signer for {name} is not certified by its issuer") from None
                if signer.issuer != issuer.subject:
                    raise OcspError(f"OCSP signer for {name} names another issuer")
                try:
                    eku = signer.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
                except x509.ExtensionNotFound:
                    eku = []
                if ExtendedKeyUsageOID.OCSP_SIGNING not in eku:
                    raise OcspError(f"OCSP signer for {name} lacks id-kp-OCSPSigning")
                if not signer.not_valid_before_utc <= at <= signer.not_valid_after_utc:
                    raise OcspError(f"OCSP signer for {name} is not valid at {at.isoformat()}")
        if rsp.responder_key_hash is not None:
            if rsp.responder_key_hash != x509.SubjectKeyIdentifier.from_public_key(signer.public_key()).digest:
                raise OcspError(f"OCSP ResponderID for {name} does not name the signer")
        elif rsp.responder_name != signer.subject:
            raise OcspError(f"OCSP ResponderID for {name} does not name the signer")
        _verify_sig(signer.public_key(), rsp.signature, rsp.tbs_response_bytes, rsp.signature_hash_algorithm,
                    f"OCSP response for {name}")
        this_update, next_update = single.this_update_utc, single.next_update_utc
        if next_update is None:
            raise OcspError(f"OCSP response for {name} has no nextUpdate")
        if not this_update <= at <= next_update:
            raise OcspError(f"OCSP response for {name} is not current at {at.isoformat()} "
                            f"(thisUpdate {this_update.isoformat()}, nextUpdate {next_update.isoformat()})")
        if at - this_update > max_age:
            raise OcspError(f"OCSP response for {name} is older than {max_age}")
        if nonce is not None:
            try:
                echoed = rsp.extensions.get_extension_for_class(x509.OCSPNonce).value.nonce
            except x509.ExtensionNotFound:
                raise OcspError(f"OCSP response for {name} carries no nonce") from None
            if echoed != nonce:
                raise OcspError(f"OCSP response for {name}: nonce is not the one sent")
        status = single.certificate_status
        if status == ocsp.OCSPCertStatus.GOOD:
            return OcspResult("good", None, this_update, next_update)
        if status == ocsp.OCSPCertStatus.REVOKED:
            reason = single.revocation_reason
            return OcspResult("revoked", reason.name if reason else "unspecified", this_update, next_update)
        return OcspResult("unknown", None, this_update, next_update)
    except OcspError:
        raise
    except (ValueError, TypeError, AttributeError) as e:
        raise OcspError(f"OCSP response for {name} is malformed: {e}") from None


class OcspClient:
    """Ask *transport* (``request DER -> response DER``) about certificates. *nonce*: send
    a fresh 32-byte nonce from *rng* and require it back."""

    def __init__(self, transport, *, nonce=True, rng=os.urandom, max_age=datetime.timedelta(days=1)):
        if not callable(transport) or not callable(rng):
            raise TypeError("transport and rng must be callables")
        if not isinstance(nonce, bool):
            raise TypeError("nonce must be a bool")
        self.transport, self.nonce, self.rng, self.max_age = transport, nonce, rng, max_age

    def status(self, cert, issuer, *, at) -> OcspResult:
        nonce = self.rng(32) if self.nonce else None
        response = self.transport(build_request(cert, issuer, nonce))
        return check_response(response, cert, issuer, at=at, nonce=nonce, max_age=self.max_age)
