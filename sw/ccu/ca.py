"""Manufacturer CA model: firmware signing, CIK/PIK certificates, reference measurements.

At manufacturing the CA harvests the device's CSRs (:meth:`ManufacturerCA.provision`)
and issues the CIK certificate (which the device keeps in public flash and returns with
every report) and a CA-issued PIK certificate. It also publishes a *reference
certificate*: a CA-signed X.509 certificate whose measurement extension lists the
known-good values a relying party compares against (like NVIDIA's RIMs).
"""
import hashlib

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric import ec

from . import certs
from .errors import ChainError
from .firmware import CCE, SBL, FirmwareBundle, FirmwareImage, sign_firmware
from .measure import config_measurement, measure

__all__ = ["ManufacturerCA", "reference_measurements", "REFERENCE_NAMES"]

REFERENCE_NAMES = (SBL, "icu-firmware", CCE, "ipu-config", "tile-bootloader")
_ROOT_NAME = certs.subject_name("ITX CCU model manufacturer root CA")
_REFERENCE_SUBJECT = certs.subject_name("ITX CCU reference measurements")


class ManufacturerCA:
    """Root CA key, firmware signing key and the certificates issued with them."""

    def __init__(self):
        self._key = ec.generate_private_key(ec.SECP384R1())
        self._fw_key = ec.generate_private_key(ec.SECP384R1())
        self.certificate = certs.issue_certificate(
            self._key, _ROOT_NAME, _ROOT_NAME, self._key.public_key(), ca=True,
            path_length=2)
        self.firmware_public_key = self._fw_key.public_key()

    def sign_firmware(self, name: str, code: bytes) -> FirmwareImage:
        return sign_firmware(self._fw_key, name, code)

    def bundle(self, sbl: bytes, cce: bytes, icu_firmware: bytes,
               tile_bootloader: bytes) -> FirmwareBundle:
        """A signed firmware bundle for the CCU flash."""
        return FirmwareBundle(self.sign_firmware(SBL, sbl), self.sign_firmware(CCE, cce),
                              icu_firmware, tile_bootloader)

    @staticmethod
    def _check_csr(csr, what):
        if not csr.is_signature_valid or not certs.is_p384(csr.public_key()):
            raise ChainError(f"{what} CSR is not a valid self-signed P-384 request")

    def issue_cik_certificate(self, csr: x509.CertificateSigningRequest) -> x509.Certificate:
        """CIK certificate: a CA that may sign exactly one level of CA (PIK) below it."""
        self._check_csr(csr, "CIK")
        return certs.issue_certificate(self._key, _ROOT_NAME, csr.subject, csr.public_key(),
                                       ca=True, path_length=1)

    def issue_pik_certificate(self, csr: x509.CertificateSigningRequest) -> x509.Certificate:
        """CA-issued PIK certificate carrying the CSR's measurements (for the SBL version
        present at manufacturing; later versions rely on the CIK-signed PIK certificate)."""
        self._check_csr(csr, "PIK")
        meas = certs.measurements_of(csr, "PIK CSR")
        return certs.issue_certificate(self._key, _ROOT_NAME, csr.subject, csr.public_key(),
                                       ca=True, path_length=0, measurements=meas)

    def provision(self, device) -> None:
        """Manufacturing: boot the device once if needed, harvest its CSRs, store the CIK
        (and PIK) certificates in its public flash."""
        if device.certificates is None:
            device.power_on()
        out = device.certificates
        device.store_issued_certificates(self.issue_cik_certificate(out.cik_csr),
                                         self.issue_pik_certificate(out.pik_csr))

    def reference_certificate(self, bundle: FirmwareBundle) -> x509.Certificate:
        """Known-good measurements of ``bundle`` and of the trusted-mode configuration.
        The subject key is the CA's own: the certificate only carries data."""
        refs = {SBL: measure(bundle.sbl.code), "icu-firmware": measure(bundle.icu_firmware),
                CCE: measure(bundle.cce.code), "ipu-config": config_measurement(True),
                "tile-bootloader": measure(bundle.tile_bootloader)}
        return certs.issue_certificate(self._key, _ROOT_NAME, _REFERENCE_SUBJECT,
                                       self._key.public_key(), ca=False, measurements=refs,
                                       serial=_serial(refs))


def _serial(refs):
    """A serial number unique to the reference set (root and references share an issuer)."""
    return int.from_bytes(hashlib.sha384(b"".join(refs.values())).digest()[:19], "big") >> 1 | 1


def reference_measurements(reference: x509.Certificate, ca: x509.Certificate) -> dict:
    """The reference values, after checking the certificate is the CA's (ChainError)."""
    try:
        reference.verify_directly_issued_by(ca)
    except (InvalidSignature, ValueError, TypeError) as e:
        raise ChainError("reference certificate is not signed by the manufacturer CA "
                         f"({type(e).__name__})") from None
    refs = certs.measurements_of(reference, "reference certificate")
    missing = [n for n in REFERENCE_NAMES if n not in refs]
    if missing:
        raise ChainError(f"reference certificate lacks {', '.join(missing)}")
    return refs

