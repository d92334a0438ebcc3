"""Certificate chains for the verifier: parsing (NVIDIA's PEM file, SPDM's chain format,
a RIM's KeyInfo) and path checking to a trusted root at a given time.

:func:`check_path` checks a chain given leaf first: every certificate's issuer name is the
next one's subject and its ECDSA signature verifies under the next one's key; every
certificate is valid at *at*; every issuer is a CA (BasicConstraints cA) and the leaf is
not; the chain ends in the trusted root itself (byte for byte) or in a certificate the
trusted root issued. It raises :class:`PathError` (internal: the verifier turns it into a
named failure; the stand-alone RIM check into :class:`~sw.attest.errors.RimSignatureError`).
"""
import datetime
import hashlib

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from sw.spdm.errors import SpdmError
from sw.spdm.messages import decode_cert_chain

from .errors import ChainFormatError

__all__ = ["PathError", "check_path", "load_pem_chain", "load_spdm_chain", "load_chain", "certificate_fwid",
           "FWID_OID", "der", "parsed"]

FWID_OID = "2.23.133.5.4.1"           # TCG DICE TcbInfo: the FWID of the firmware that holds the key
_SHA384_OID_DER = bytes.fromhex("0609608648016503040202")


class PathError(Exception):
    """Internal: the chain does not check (message says where)."""


def der(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.DER)


def parsed(cert: x509.Certificate) -> x509.Certificate:
    """*cert* after every field the checks read has been decoded (``cryptography`` decodes
    lazily, so a malformed field would otherwise surface mid-check); ChainFormatError if any
    does not decode."""
    try:
        cert.subject.rfc4514_string()
        cert.issuer.rfc4514_string()
        cert.not_valid_before_utc, cert.not_valid_after_utc, cert.serial_number  # noqa: B018
        list(cert.extensions)
        cert.public_key()
        cert.signature_hash_algorithm  # noqa: B018
        cert.tbs_certificate_bytes, cert.signature  # noqa: B018
    except Exception as e:  # noqa: BLE001 - ValueError, UnsupportedAlgorithm, ...: all malformed input
        raise ChainFormatError(f"certificate field does not decode: {type(e).__name__}: {e}") from None
    return cert


def load_pem_chain(text: bytes) -> list:
    """NVIDIA's chain file: PEM certificates leaf first, root last. The text must be the
    canonical PEM of the certificates it holds (64-column base64, ``\\n`` line ends, at most
    one trailing newline): a PEM loader ignores some bytes (the unused low bits of the last
    base64 character, text between blocks), and evidence with ignored bytes is refused."""
    if not isinstance(text, (bytes, bytearray)):
        raise ChainFormatError(f"a PEM chain is bytes, not {type(text).__name__}")
    text = bytes(text)
    try:
        certs = [parsed(c) for c in x509.load_pem_x509_certificates(text)]
    except ChainFormatError:
        raise
    except (ValueError, x509.InvalidVersion) as e:
        raise ChainFormatError(f"PEM chain does not parse: {e}") from None
    canonical = b"".join(c.public_bytes(serialization.Encoding.PEM) for c in certs)
    if text.removesuffix(b"\n") != canonical.removesuffix(b"\n"):
        raise ChainFormatError("PEM chain is not the canonical encoding of its certificates")
    return certs


def load_spdm_chain(chain: bytes) -> list:
    """An SPDM certificate chain (DSP0274: Length, Reserved, RootHash, DER certificates root
    first), returned leaf first. RootHash must be the SHA-384 of the first certificate."""
    if not isinstance(chain, (bytes, bytearray)):
        raise ChainFormatError(f"an SPDM chain is bytes, not {type(chain).__name__}")
    try:
        root_hash, ders = decode_cert_chain(bytes(chain))
        certs = [parsed(x509.load_der_x509_certificate(d)) for d in ders]
    except ChainFormatError:
        raise
    except (SpdmError, ValueError, TypeError, x509.InvalidVersion) as e:
        raise ChainFormatError(f"SPDM certificate chain does not parse: {e}") from None
    if not certs:
        raise ChainFormatError("SPDM certificate chain holds no certificate")
    if root_hash != hashlib.sha384(ders[0]).digest():
        raise ChainFormatError("SPDM chain RootHash is not the hash of its first certificate")
    if any(der(c) != d for c, d in zip(certs, ders)):
        raise ChainFormatError("a certificate is not in DER")
    return certs[::-1]


def load_chain(data) -> list:
    """Leaf-first certificates from PEM text, SPDM chain bytes, or a sequence of
    ``x509.Certificate`` (taken as leaf first)."""
    if isinstance(data, (bytes, bytearray)):
        return load_pem_chain(data) if bytes(data[:10]) == b"-----BEGIN" else load_spdm_chain(data)
    if isinstance(data, (list, tuple)) and data and all(isinstance(c, x509.Certificate) for c in data):
        return [parsed(c) for c in data]
    raise ChainFormatError(f"a certificate chain is PEM bytes, SPDM chain bytes or certificates, not {data!r:.60}")


def _is_ca(cert):
    try:
        return cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    except x509.ExtensionNotFound:
        return False


def _check_signed_by(cert, issuer, what):
    if cert.issuer != issuer.subject:
        raise PathError(f"{what}: issuer is not {issuer.subject.rfc4514_string()}")
    key = issuer.public_key()
    if not isinstance(key, ec.EllipticCurvePublicKey):
        raise PathError(f"{what}: issuer key is not ECDSA")
    try:
        key.verify(cert.signature, cert.tbs_certificate_bytes, ec.ECDSA(cert.signature_hash_algorithm))
    except (InvalidSignature, TypeError, ValueError, x509.UnsupportedGeneralNameType):
        raise PathError(f"{what}: signature does not verify under {issuer.subject.rfc4514_string()}") from None
    except Exception as e:  # noqa: BLE001 - an unsupported signature algorithm is a failed link
        raise PathError(f"{what}: signature not checkable ({type(e).__name__})") from None


def check_path(certs, trusted_root: x509.Certificate, at: datetime.datetime, what="chain"):
    """Check *certs* (leaf first) up to *trusted_root* at time *at*; return them."""
    if not certs:
        raise PathError(f"{what}: no certificates")
    root_der = der(trusted_root)
    if der(certs[-1]) == root_der:
        path = list(certs)
    else:
        path = list(certs) + [trusted_root]
    if any(der(c) == root_der for c in path[:-1]):
        raise PathError(f"{what}: the trusted root appears inside the chain")
    for i, cert in enumerate(path):
        name = f"{what} certificate {i} ({cert.subject.rfc4514_string()})"
        if not cert.not_valid_before_utc <= at <= cert.not_valid_after_utc:
            raise PathError(f"{name}: not valid at {at.isoformat()}")
        if i + 1 < len(path):
            _check_signed_by(cert, path[i + 1], name)
        if (i > 0) != _is_ca(cert):
            raise PathError(f"{name}: CA flag does not fit its place in the chain")
    return path


def certificate_fwid(cert: x509.Certificate):
    """The SHA-384 FWID in the certificate's TCG DICE TcbInfo extension (NVIDIA's attestation
    leaf carries one), or None when the certificate has no such extension."""
    for ext in cert.extensions:
        if ext.oid.dotted_string in (FWID_OID, FWID_OID + ".1"):
            value = ext.value.value
            at = value.find(_SHA384_OID_DER)
            if at < 0 or value[at + len(_SHA384_OID_DER):at + len(_SHA384_OID_DER) + 2] != b"\x04\x30":
                raise ChainFormatError("TcbInfo extension holds no SHA-384 FWID")
            start = at + len(_SHA384_OID_DER) + 2
            return value[start:start + 48]
    return None
