"""DICE-style measured boot of the CCU: UDS → HDI/CDI → CIK/PIK/AK.

Derivations (HKDF-SHA384, RFC 5869; every label is ASCII, salt "zero" = 48 zero bytes)::

    HDI = HKDF(IKM=UDS, salt=zero,               info="ITX-CCU HDI", L=48)
    CDI = HKDF(IKM=UDS, salt=M(secondary bootloader), info="ITX-CCU CDI", L=48)
    CIK = key(HDI, salt=zero,   label="ITX-CCU CIK")
    PIK = key(CDI, salt=zero,   label="ITX-CCU PIK")
    AK  = key(CDI, salt=M(CCE), label="ITX-CCU AK")
    key(s, salt, label): d = OS2IP(HKDF(IKM=s, salt, info=label, L=64)) mod (n-1) + 1,
                         the P-384 private scalar (FIPS 186-5 A.2.1: 16 extra bytes make
                         the bias negligible); ec.derive_private_key(d, SECP384R1)

Hand-over discipline (why the layers are objects): each layer receives only what it
needs and leaves nothing behind. The primary bootloader reads the UDS once, locks the UDS
region until the next reset, derives HDI and CDI and zeroes its UDS copy. The secondary
bootloader zeroes HDI and CDI after deriving its keys, drops CIK and PIK after signing
the certificates, and hands the CCE the AK alone. Secrets live in bytearrays so they can
be zeroed in place; Python cannot promise that no copy survives in freed memory, so the
model checks what remains *reachable* (see test_dice.py).
"""
import os
from dataclasses import dataclass

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from . import certs
from .errors import UdsLockedError
from .firmware import CCE, SBL, FirmwareImage, verify_firmware
from .measure import SLOT_CCE, SLOT_ICU, SLOT_SBL, MeasurementStore, measure

__all__ = ["UDS_SIZE", "derive_hdi", "derive_cdi", "derive_identity_key", "UdsRegion",
           "SblHandover", "DeviceCertificates", "CceHandover", "PrimaryBootloader",
           "SecondaryBootloader", "zeroize"]

UDS_SIZE = 48
_ZERO_SALT = bytes(48)
_P384_N = int("FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFC7634D81F4372DDF"
              "581A0DB248B0A77AECEC196ACCC52973", 16)   # order of the P-384 group


def _hkdf(ikm, salt, info: bytes, length: int) -> bytearray:
    return bytearray(HKDF(hashes.SHA384(), length, bytes(salt), info).derive(bytes(ikm)))


def zeroize(buf: bytearray | None) -> None:
    """Overwrite a secret in place (the only scrub a bytearray allows)."""
    if buf is not None:
        buf[:] = bytes(len(buf))


def derive_hdi(uds) -> bytearray:
    return _hkdf(uds, _ZERO_SALT, b"ITX-CCU HDI", 48)


def derive_cdi(uds, sbl_measurement: bytes) -> bytearray:
    return _hkdf(uds, sbl_measurement, b"ITX-CCU CDI", 48)


def derive_identity_key(secret, label: bytes, salt: bytes = _ZERO_SALT):
    """Deterministic P-384 key pair from a DICE secret (see module docstring)."""
    okm = _hkdf(secret, salt, label, 64)
    d = int.from_bytes(okm, "big") % (_P384_N - 1) + 1
    zeroize(okm)
    return ec.derive_private_key(d, ec.SECP384R1())


class UdsRegion:
    """The flash region holding the UDS: written once from the TRNG on first power-on,
    readable once per boot (the primary bootloader locks it), unlocked only by reset."""
    __slots__ = ("_uds", "_locked")

    def __init__(self):
        self._uds, self._locked = None, False

    def __repr__(self):              # never show the secret, even in a traceback
        return f"UdsRegion(provisioned={self._uds is not None}, locked={self._locked})"

    @property
    def locked(self) -> bool:
        return self._locked

    def read(self, trng) -> bytearray:
        if self._locked:
            raise UdsLockedError("the UDS region is locked until the next device reset")
        if self._uds is None:        # first power-on: sample the UDS, once, ever
            self._uds = bytes(trng(UDS_SIZE))
            if len(self._uds) != UDS_SIZE:
                raise ValueError(f"TRNG returned {len(self._uds)} bytes, need {UDS_SIZE}")
        return bytearray(self._uds)

    def lock(self):
        self._locked = True

    def reset(self):
        self._locked = False


@dataclass
class SblHandover:
    """Primary → secondary bootloader: HDI, CDI and the (public) SBL measurement."""
    hdi: bytearray | None
    cdi: bytearray | None
    sbl_measurement: bytes


@dataclass(frozen=True)
class DeviceCertificates:
    """Public outputs of the secondary bootloader (all may leave the CCU)."""
    cik_csr: object
    pik_csr: object
    pik_certificate: object      # signed by CIK
    ak_certificate: object       # signed by PIK


@dataclass
class CceHandover:
    """Secondary bootloader → CCE: the AK and the public certificates, nothing else."""
    ak: object
    certificates: DeviceCertificates


class PrimaryBootloader:
    """Immutable first layer (OTP flash): authenticates and measures the secondary
    bootloader, derives HDI and CDI from the UDS and scrubs the UDS."""

    def __init__(self, uds_region: UdsRegion, firmware_key, store: MeasurementStore,
                 trng=os.urandom):
        self._region, self._fw_key, self._store, self._trng = \
            uds_region, firmware_key, store, trng

    def run(self, sbl: FirmwareImage) -> SblHandover:
        verify_firmware(sbl, self._fw_key, SBL)   # before touching the UDS
        m = measure(sbl.code)
        uds = self._region.read(self._trng)
        self._region.lock()
        try:
            handover = SblHandover(derive_hdi(uds), derive_cdi(uds, m), m)
        finally:
            zeroize(uds)
        self._store.extend("pbl", SLOT_SBL, m)
        return handover


class SecondaryBootloader:
    """Mutable second layer: CIK from HDI, PIK from CDI, AK from CDI and the CCE
    measurement; issues the PIK and AK certificates; hands the CCE only the AK."""

    def __init__(self, handover: SblHandover, firmware_key, store: MeasurementStore):
        self._in, self._fw_key, self._store = handover, firmware_key, store

    def run(self, cce: FirmwareImage, icu_firmware: bytes) -> CceHandover:
        h = self._in
        try:
            verify_firmware(cce, self._fw_key, CCE)
            m_icu, m_cce = measure(icu_firmware), measure(cce.code)
            cik = derive_identity_key(h.hdi, b"ITX-CCU CIK")
            pik = derive_identity_key(h.cdi, b"ITX-CCU PIK")
            ak = derive_identity_key(h.cdi, b"ITX-CCU AK", salt=m_cce)
        finally:                     # success or not, HDI and CDI die here
            zeroize(h.hdi)
            zeroize(h.cdi)
            h.hdi = h.cdi = None
            self._in = None
        pik_meas = {SBL: h.sbl_measurement, "icu-firmware": m_icu}
        cik_name = certs.subject_name("ITX CCU CIK", cik.public_key())
        pik_name = certs.subject_name("ITX CCU PIK", pik.public_key())
        out = DeviceCertificates(
            cik_csr=certs.build_csr(cik, cik_name),
            pik_csr=certs.build_csr(pik, pik_name, pik_meas),
            pik_certificate=certs.issue_certificate(
                cik, cik_name, pik_name, pik.public_key(), ca=True, path_length=0,
                measurements=pik_meas),
            ak_certificate=certs.issue_certificate(
                pik, pik_name, certs.subject_name("ITX CCU AK", ak.public_key()),
                ak.public_key(), ca=False, measurements={CCE: m_cce}))
        self._store.extend("sbl", SLOT_ICU, m_icu)
        self._store.extend("sbl", SLOT_CCE, m_cce)
        return CceHandover(ak, out)
