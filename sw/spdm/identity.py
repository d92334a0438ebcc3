"""The GPU's device identity: per-device ECC P-384 key pairs and the certificate chain
in the shape H100 ships (NVIDIA's sample chain in ``nv-local-gpu-verifier``:
Device Identity CA → GH100 Identity → Provisioner ICA → per-device GSP BROM → GSP FMC
leaf; every link ECDSA P-384 with SHA-384):

    device root (self-signed CA)  →  product CA  →  provisioner CA
        →  device identity (one key per GPU, serial number in the subject)
        →  attestation key (leaf: signs CHALLENGE_AUTH, MEASUREMENTS, KEY_EXCHANGE_RSP)

:class:`Manufacturer` holds the three CA keys; :meth:`Manufacturer.issue_device` makes a
device's two keys and certificates. Keys are derived from seeds (SHA-384 of a label, mod
the group order) so that test runs are reproducible; a real device generates its keys
from fused secrets (the ITX CCU model in ``sw.ccu`` shows that DICE derivation).
"""
import dataclasses
import datetime
import hashlib

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from .messages import encode_cert_chain

__all__ = ["Manufacturer", "DeviceIdentity", "derive_key", "issue_certificate", "model_name", "NOT_BEFORE",
           "NOT_AFTER"]

NOT_BEFORE = datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc)
NOT_AFTER = datetime.datetime(9999, 12, 31, 23, 59, 59, tzinfo=datetime.timezone.utc)
_P384_ORDER = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFC7634D81F4372DDF581A0DB248B0A77AECEC196ACCC52973


def derive_key(seed: bytes) -> ec.EllipticCurvePrivateKey:
    """A P-384 private key from *seed* (reproducible test keys)."""
    if not isinstance(seed, bytes):
        raise TypeError("seed must be bytes")
    scalar = int.from_bytes(hashlib.sha384(b"spdm-model key " + seed).digest(), "big") % (_P384_ORDER - 1) + 1
    return ec.derive_private_key(scalar, ec.SECP384R1())


def model_name(cn: str, serial=None) -> x509.Name:
    """The subject of a model certificate: *cn*, the model's organisation, and *serial*
    (a device's serial number) if given."""
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, cn),
             x509.NameAttribute(NameOID.ORGANIZATION_NAME, "CC Accel Model")]
    if serial is not None:
        attrs.append(x509.NameAttribute(NameOID.SERIAL_NUMBER, serial))
    return x509.Name(attrs)


def issue_certificate(subject, key, issuer, issuer_key, *, ca, path_len=None, ocsp_signing=False,
                      not_before=NOT_BEFORE, not_after=NOT_AFTER):
    """An X.509 v3 certificate for *key* signed ECDSA-SHA-384 by *issuer_key*: the one
    certificate builder of the attestation model (device chain here, RIM and OCSP
    certificates in :mod:`sw.attest`). *ocsp_signing*: a delegated OCSP responder
    certificate (EKU id-kp-OCSPSigning, RFC 6960 4.2.2.2)."""
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
class DeviceIdentity:
    """One GPU's identity: its attestation private key and the certificates root first."""
    device_key: ec.EllipticCurvePrivateKey
    attestation_key: ec.EllipticCurvePrivateKey
    certificates: tuple  # x509.Certificate, root first, attestation leaf last

    def ders(self):
        return [c.public_bytes(serialization.Encoding.DER) for c in self.certificates]

    def cert_chain(self) -> bytes:
        """The SPDM certificate chain of slot 0 (Length, Reserved, RootHash, DER certs)."""
        ders = self.ders()
        return encode_cert_chain(ders[0], ders)

    @property
    def root(self) -> x509.Certificate:
        return self.certificates[0]

    @property
    def leaf(self) -> x509.Certificate:
        return self.certificates[-1]


class Manufacturer:
    """The device maker's CA hierarchy: root → product CA → provisioner CA."""

    def __init__(self, seed: bytes = b"manufacturer"):
        if not isinstance(seed, bytes):
            raise TypeError("seed must be bytes")
        self._seed = seed
        self.root_key = derive_key(seed + b"/root")
        self.product_key = derive_key(seed + b"/product")
        self.provisioner_key = derive_key(seed + b"/provisioner")
        root_name = model_name("Model Device Identity CA")
        product_name = model_name("Model GPU Identity")
        prov_name = model_name("Model GPU Provisioner ICA 1")
        self.root = issue_certificate(root_name, self.root_key, root_name, self.root_key, ca=True, path_len=3)
        self.product = issue_certificate(product_name, self.product_key, root_name, self.root_key, ca=True, path_len=2)
        self.provisioner = issue_certificate(prov_name, self.provisioner_key, product_name, self.product_key,
                                             ca=True, path_len=1)

    def issue_device(self, serial: int) -> DeviceIdentity:
        """Keys and certificates of the GPU with this serial number (any 64-bit int)."""
        if not isinstance(serial, int) or isinstance(serial, bool):
            raise TypeError("serial must be an int")
        if not 0 <= serial < 1 << 64:
            raise ValueError("serial must fit 64 bits")
        tag = serial.to_bytes(8, "big")
        # (the manufacturer's seed too: two makers never issue one key for the same serial)
        device_key = derive_key(self._seed + b"/device/" + tag)
        ak = derive_key(self._seed + b"/attestation/" + tag)
        dev_name = model_name("Model GPU GSP BROM", tag.hex().upper())
        device = issue_certificate(dev_name, device_key, self.provisioner.subject, self.provisioner_key,
                                   ca=True, path_len=0)
        leaf = issue_certificate(model_name("Model GPU GSP FMC LF", tag.hex().upper()), ak, dev_name, device_key,
                                 ca=False)
        return DeviceIdentity(device_key, ak, (self.root, self.product, self.provisioner, device, leaf))
