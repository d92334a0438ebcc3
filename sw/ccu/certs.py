"""X.509 pieces of the CCU key hierarchy, built with ``cryptography``.

- The *measurement extension* (private OID :data:`MEASUREMENT_OID`, non-critical) records
  named SHA-384 measurements::

      Measurements ::= SEQUENCE OF SEQUENCE {
          component  UTF8String,           -- e.g. "secondary-bootloader"
          hashAlg    OBJECT IDENTIFIER,    -- id-sha384 (2.16.840.1.101.3.4.2.2)
          digest     OCTET STRING }        -- 48 bytes

  It is in the PIK CSR/certificate (secondary bootloader, ICU firmware), the AK
  certificate (CCE) and the manufacturer's reference certificate (every known-good value).
- Device certificates have no meaningful validity period (the CCU has no trusted clock):
  notBefore 2024-01-01, notAfter 9999-12-31 23:59:59 (RFC 5280 § 4.1.2.5, "no expiry").
  Serial numbers are taken from the subject key's hash, so re-issuing is deterministic;
  they are positive and at most 19 octets (RFC 5280 § 4.1.2.2).
- The profile is the one standard path validators demand (``openssl verify -x509_strict``
  and ``cryptography.x509.verification``'s client verifier accept CA → CIK → PIK → AK):
  basicConstraints critical on every certificate, keyUsage critical (keyCertSign on CAs
  only), a Subject Key Identifier on every certificate (RFC 5280 method 1: SHA-1 of the
  subjectPublicKey bits), an Authority Key Identifier (the issuer's key identifier) on
  every certificate that is not self-signed, and on leaves a subject alternative name,
  the ``urn:uuid:`` name of the key (:func:`key_urn`), which the webpki profile requires
  of end-entity certificates.
"""
import datetime
import hashlib
import uuid

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from . import der
from .errors import ChainError

__all__ = ["MEASUREMENT_OID", "encode_measurements", "decode_measurements",
           "measurements_of", "subject_name", "build_csr", "issue_certificate",
           "fingerprint", "key_id", "key_urn", "serial_number", "is_p384", "NOT_BEFORE",
           "NOT_AFTER"]

# 2.25.<UUID> needs no registration (ITU-T X.667) and cannot collide with a real OID.
MEASUREMENT_OID = x509.ObjectIdentifier("2.25.320831773000326830934649564655485912054")
_KEY_NAMESPACE = uuid.UUID(int=int(MEASUREMENT_OID.dotted_string.split(".")[2]))
_SHA384_OID = der.tlv(der.OID, bytes.fromhex("608648016503040202"))
NOT_BEFORE = datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc)
NOT_AFTER = datetime.datetime(9999, 12, 31, 23, 59, 59, tzinfo=datetime.timezone.utc)


def encode_measurements(items: dict[str, bytes]) -> bytes:
    """DER of the Measurements sequence, in the order of ``items``."""
    body = b"".join(
        der.tlv(der.SEQUENCE, der.tlv(der.UTF8STRING, name.encode()) + _SHA384_OID
                + der.tlv(der.OCTET_STRING, digest))
        for name, digest in items.items())
    return der.tlv(der.SEQUENCE, body)


def decode_measurements(value: bytes) -> dict[str, bytes]:
    """Inverse of :func:`encode_measurements`: :class:`~sw.ccu.der.DerError` (a
    ValueError) on anything else — malformed DER, not exactly one outer SEQUENCE, an entry
    that is not (UTF8String, id-sha384, 48-byte digest), a name that is not UTF-8, a
    duplicate name."""
    outer = der.read_all(value, der.SEQUENCE)
    if len(outer) != 1:
        raise der.DerError(f"measurements are {len(outer)} SEQUENCEs, not one")
    items = {}
    for entry in der.read_all(outer[0], der.SEQUENCE):
        tag, name, pos = der.read_tlv(entry)
        if tag != der.UTF8STRING or entry[pos:pos + len(_SHA384_OID)] != _SHA384_OID:
            raise der.DerError("measurement entry is not (UTF8String, id-sha384, digest)")
        digest = der.read_all(entry[pos + len(_SHA384_OID):], der.OCTET_STRING)
        try:
            name = name.decode()
        except UnicodeDecodeError:
            raise der.DerError("measurement name is not UTF-8") from None
        if len(digest) != 1 or len(digest[0]) != 48 or name in items:
            raise der.DerError("measurement digest is not one 48-byte OCTET STRING, or a duplicate name")
        items[name] = digest[0]
    return items


def measurements_of(obj, what: str) -> dict[str, bytes]:
    """The measurement extension of a certificate or CSR (ChainError if absent/malformed,
    or if the certificate's extensions do not parse)."""
    try:
        ext = obj.extensions.get_extension_for_oid(MEASUREMENT_OID)
        return decode_measurements(ext.value.value)
    except x509.ExtensionNotFound:
        raise ChainError(f"{what} has no measurement extension") from None
    except AttributeError:
        raise ChainError(f"{what} is not a certificate or CSR") from None
    except ValueError as e:         # DerError, or cryptography's on malformed extensions
        raise ChainError(f"{what} has a malformed measurement extension: {e}") from None


def key_id(public_key) -> bytes:
    """SHA-384 of the SubjectPublicKeyInfo: a stable device/key identifier."""
    return hashlib.sha384(public_key.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)).digest()


def fingerprint(cert: x509.Certificate) -> bytes:
    """Certificate fingerprint as used in manifests and reports: SHA-384 of the DER."""
    return cert.fingerprint(hashes.SHA384())


def subject_name(common_name: str, public_key=None) -> x509.Name:
    """CN plus, for device keys, serialNumber = first 20 bytes of the key id in hex."""
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if public_key is not None:
        attrs.append(x509.NameAttribute(NameOID.SERIAL_NUMBER, key_id(public_key)[:20].hex()))
    return x509.Name(attrs)


def _measurement_ext(measurements):
    return x509.UnrecognizedExtension(MEASUREMENT_OID, encode_measurements(measurements))


def build_csr(key, name: x509.Name, measurements=None) -> x509.CertificateSigningRequest:
    """A CSR self-signed by ``key`` (proof of possession), optionally with measurements."""
    builder = x509.CertificateSigningRequestBuilder().subject_name(name)
    if measurements:
        builder = builder.add_extension(_measurement_ext(measurements), critical=False)
    return builder.sign(key, hashes.SHA384())


def issue_certificate(issuer_key, issuer_name, subject, public_key, *, ca: bool,
                      path_length=None, measurements=None, key_agreement=False,
                      serial=None) -> x509.Certificate:
    """Sign a certificate for ``public_key``. CA certificates may sign certificates only;
    leaves sign (AK: reports) or agree keys (relying parties: ECDH)."""
    usage = dict(digital_signature=not ca and not key_agreement, content_commitment=False,
                 key_encipherment=False, data_encipherment=False,
                 key_agreement=key_agreement, key_cert_sign=ca, crl_sign=False,
                 encipher_only=False, decipher_only=False)
    serial = serial or serial_number(public_key)
    if not 0 < serial < 1 << 159:
        raise ValueError(f"serial number {serial} is not positive or exceeds 20 octets")
    builder = (x509.CertificateBuilder()
               .issuer_name(issuer_name).subject_name(subject).public_key(public_key)
               .serial_number(serial)
               .not_valid_before(NOT_BEFORE).not_valid_after(NOT_AFTER)
               .add_extension(x509.BasicConstraints(ca=ca, path_length=path_length), True)
               .add_extension(x509.KeyUsage(**usage), critical=True)
               .add_extension(x509.SubjectKeyIdentifier.from_public_key(public_key), False))
    if not ca:          # RFC 5280 path validators (webpki profile) want a SAN on leaves
        builder = builder.add_extension(x509.SubjectAlternativeName(
            [x509.UniformResourceIdentifier(key_urn(public_key))]), False)
    issuer_public = issuer_key.public_key()
    if issuer_public != public_key or issuer_name != subject:     # not self-signed
        builder = builder.add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_public), False)
    if measurements:
        builder = builder.add_extension(_measurement_ext(measurements), critical=False)
    return builder.sign(issuer_key, hashes.SHA384())


def key_urn(public_key) -> str:
    """``urn:uuid:`` name of a key (RFC 4122 name-based UUID, version 5, of the key id's
    hex in the namespace of :data:`MEASUREMENT_OID`'s UUID): the subject alternative
    name of leaf certificates."""
    return "urn:uuid:" + str(uuid.uuid5(_KEY_NAMESPACE, key_id(public_key).hex()))


def serial_number(public_key) -> int:
    """A positive serial number of at most 19 octets (RFC 5280 § 4.1.2.2 allows 20) taken
    from the subject key's hash, with the low bit set so it is never zero."""
    return int.from_bytes(key_id(public_key)[:19], "big") >> 1 | 1


def is_p384(public_key) -> bool:
    return isinstance(public_key, ec.EllipticCurvePublicKey) and \
        isinstance(public_key.curve, ec.SECP384R1)
