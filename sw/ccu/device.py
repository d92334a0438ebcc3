"""The CCU board: UDS flash, measurement storage, firmware flash, the SXP port, and the
boot sequence primary bootloader → secondary bootloader → CCE.

``power_on()`` runs measured boot and returns the CCE (the API object). ``reset()`` is the
coupled CCU/ICU/IPU chip reset: it scrubs the running CCE, resets the SXP and the
measurement slots, unlocks the UDS region and boots again. ``flash_firmware()`` replaces
the mutable layers; the new images are measured at the next boot.
"""
import os

from cryptography import x509

from .cce import Cce
from .dice import DeviceCertificates, PrimaryBootloader, SecondaryBootloader, UdsRegion
from .errors import ApiOrderError
from .firmware import FirmwareBundle
from .measure import MeasurementStore

__all__ = ["Device", "CertificateStore"]


class CertificateStore:
    """Public flash: this boot's certificates and the CA-issued ones from manufacturing."""

    def __init__(self):
        self.cik_certificate: x509.Certificate | None = None      # CA-issued
        self.ca_pik_certificate: x509.Certificate | None = None   # CA-issued
        self.boot: DeviceCertificates | None = None               # from the last boot

    @property
    def pik_certificate(self):
        return self.boot.pik_certificate     # CIK-signed: valid for any SBL version

    @property
    def ak_certificate(self):
        return self.boot.ak_certificate


class Device:
    """One CCU with its SXP port. ``trng`` is the hardware TRNG the primary bootloader
    samples the UDS from on the very first power-on (tests pass a fixed one)."""

    def __init__(self, firmware: FirmwareBundle, firmware_public_key, port, trng=os.urandom,
                 cc_mode=None):
        """*port* is the CCU's port into the device (:class:`sw.ccu.sxp_port.CcuPort`).
        *cc_mode*, if given, is a callable returning the active confidential-computing
        mode of the device's ``cc_ctrl`` (its ``mode`` port); create_tee measures it into
        slot 5 (:data:`sw.ccu.measure.SLOT_CC_MODE`)."""
        self._firmware, self._fw_key, self.port, self._trng = \
            firmware, firmware_public_key, port, trng
        self._cc_mode = cc_mode
        self._uds = UdsRegion()
        self.measurements = MeasurementStore()
        self._store = CertificateStore()
        self._exception_log: list = []     # public, kept across chip resets
        self.cce: Cce | None = None

    @property
    def certificates(self) -> DeviceCertificates | None:
        """CSRs and certificates the secondary bootloader produced on the last boot."""
        return self._store.boot

    @property
    def cik_certificate(self):
        return self._store.cik_certificate

    def store_issued_certificates(self, cik_certificate, pik_certificate=None) -> None:
        """Manufacturing only: keep the CA's certificates in public flash."""
        self._store.cik_certificate = cik_certificate
        self._store.ca_pik_certificate = pik_certificate

    @property
    def exception_log(self):
        """Every exception the CCU handled on this device, across resets (oldest first)."""
        return tuple(self._exception_log)

    def flash_firmware(self, firmware: FirmwareBundle) -> None:
        """Firmware update of the mutable layers; takes effect at the next reset."""
        self._firmware = firmware

    def power_on(self) -> Cce:
        if self.cce is not None:
            raise ApiOrderError("the device is already on: use reset()")
        pbl = PrimaryBootloader(self._uds, self._fw_key, self.measurements, self._trng)
        handover = pbl.run(self._firmware.sbl)
        sbl = SecondaryBootloader(handover, self._fw_key, self.measurements)
        out = sbl.run(self._firmware.cce, self._firmware.icu_firmware)
        self._store.boot = out.certificates
        self.cce = Cce(out.ak, self._store, self.measurements, self.port,
                       self._firmware.tile_bootloader, cc_mode=self._cc_mode,
                       exception_log=self._exception_log)
        return self.cce

    def reset(self) -> Cce:
        """Chip reset, then boot."""
        if self.cce is not None:
            self.cce.scrub()
            self.cce = None
        if hasattr(self.port, "reset"):      # the reset wire reaches the SXP too
            self.port.reset()
        self.measurements.reset()
        self._uds.reset()
        self._store.boot = None
        return self.power_on()
