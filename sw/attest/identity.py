"""Certificate hierarchies of the attestation model besides the device's own
(:mod:`sw.spdm.identity`): the RIM signer's and the OCSP responders'.

RIM chain, the shape of NVIDIA's (``NVIDIA CoRIM signing Root CA`` → ``NVIDIA Reference
Value GH100 CA`` → ``… L3 GH100 001`` → ``HCC RIM L4 Signer``; every link ECDSA P-384 with
SHA-384), one level shorter:

    RIM root (self-signed CA)  →  reference-value CA  →  RIM signer (leaf, digitalSignature)

Keys come from seeds through :func:`sw.spdm.identity.derive_key`, so runs are
reproducible. :func:`issue_certificate` is the one certificate builder of this package
(also used for delegated OCSP signer certificates).
"""
import dataclasses
import hashlib

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from sw.spdm.identity import NOT_AFTER, NOT_BEFORE, derive_key

__all__ = ["RimAuthority", "RimSigner", "issue_certificate", "model_name"]


def model_name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn),
                      x509.NameAttribute(NameOID.ORGANIZATION_NAME, "CC Accel Model")])


def issue_certificate(subject, key, issuer, issuer_key, *, ca, path_len=None, ocsp_signing=False,
                      not_before=NOT_BEFORE, not_after=NOT_AFTER):
    """An X.509 v3 certificate for *key* signed ECDSA-SHA-384 by *issuer_key*. *ocsp_signing*:
    a delegated OCSP responder certificate (EKU id-kp-OCSPSigning, RFC 6960 4.2.2.2)."""
    if not isinstance(subject, x509.Name) or not isinstance(issuer, x509.Name):
        raise TypeError("subject and issuer must be x509.Name")
    if not isinstance(key, ec.EllipticCurvePrivateKey) or not isinstance(issuer_key, ec.EllipticCurvePrivateKey):
        raise TypeError("key and issuer_key must be EC private keys")
    pub = key.public_key()
    spki = pub.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(pub)
               .serial_number(int.from_bytes(hashlib.sha384(spki + subject.public_bytes()).digest()[:16], "big") >> 1)
               .not_valid_before(not_before).not_valid_after(not_after)
               .add_extension(x509.BasicConstraints(ca=ca, path_length=path_len if ca else None), critical=True)
               .add_extension(x509.KeyUsage(digital_signature=not ca, content_commitment=False, key_encipherment=False,
                                            data_encipherment=False, key_agreement=False, key_cert_sign=ca,
                                            crl_sign=ca, encipher_only=False, decipher_only=False), critical=True)
               .add_extension(x509.SubjectKeyIdentifier.from_public_key(pub), critical=False))
    if ocsp_signing:
        builder = builder.add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.OCSP_SIGNING]), critical=True)
    if issuer_key is not key:
        builder = builder.add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_key.public_key()), critical=False)
    return builder.sign(issuer_key, hashes.SHA384())


@dataclasses.dataclass(frozen=True)
class RimSigner:
    """The key that signs RIMs and its certificates, signer first, root last."""
    key: ec.EllipticCurvePrivateKey
    certificates: tuple

    @property
    def root(self) -> x509.Certificate:
        return self.certificates[-1]


class RimAuthority:
    """The RIM publisher's hierarchy: root → reference-value CA → signers."""

    def __init__(self, seed: bytes = b"rim-authority"):
        if not isinstance(seed, bytes):
            raise TypeError("seed must be bytes")
        self.seed = seed
        self.root_key = derive_key(seed + b"/root")
        self.ca_key = derive_key(seed + b"/ca")
        root_name, ca_name = model_name("Model RIM signing Root CA"), model_name("Model Reference Value CA")
        self.root = issue_certificate(root_name, self.root_key, root_name, self.root_key, ca=True, path_len=2)
        self.ca = issue_certificate(ca_name, self.ca_key, root_name, self.root_key, ca=True, path_len=0)

    def signer(self, name: str = "Model RIM Signer") -> RimSigner:
        if not isinstance(name, str) or not name:
            raise TypeError("name must be a non-empty str")
        key = derive_key(self.seed + b"/signer/" + name.encode())
        cert = issue_certificate(model_name(name), key, self.ca.subject, self.ca_key, ca=False)
        return RimSigner(key, (cert, self.ca, self.root))
