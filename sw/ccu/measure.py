"""Measurement storage: 64 extend-only SHA-384 slots, each owned by one firmware layer.

As in the H100 root of trust for storage (RTS): a slot starts at 48 zero bytes and can
only be *extended*, ``new = SHA-384(old ‖ measurement)``, so a later layer can add to the
history but never overwrite it; only the device reset (:meth:`MeasurementStore.reset`,
called by :class:`sw.ccu.device.Device` alone) returns the slots to zero. Each slot has an
owner (the layer that measures into it); an extend by anyone else is refused.

Slot layout used by the CCU firmware model (the attestation report carries all 64):

====  ======================  =====  ==========================================
slot  name                    owner  measured when
====  ======================  =====  ==========================================
0     secondary-bootloader    pbl    primary bootloader, before handing over
1     icu-firmware            sbl    secondary bootloader
2     cce                     sbl    secondary bootloader, before handing over
3     ipu-config              cce    create_tee, after entering trusted mode
4     tile-bootloader         cce    create_tee (the bootloader launch() deploys)
5     cc-mode                 cce    create_tee, on a device with a confidential-mode
                                     controller (hw/cc ``cc_ctrl``): its active mode
6-63  (unused)                cce    never extended by this model: stay zero
====  ======================  =====  ==========================================
"""
import hashlib

from .errors import SlotOwnerError

__all__ = ["SLOTS", "DIGEST_SIZE", "SLOT_SBL", "SLOT_ICU", "SLOT_CCE", "SLOT_CONFIG",
           "SLOT_TILE_BOOTLOADER", "SLOT_CC_MODE", "SLOT_NAMES", "SLOT_OWNERS", "MeasurementStore",
           "measure", "extend_value", "config_measurement", "cc_mode_measurement"]

SLOTS = 64
DIGEST_SIZE = 48
SLOT_SBL, SLOT_ICU, SLOT_CCE, SLOT_CONFIG, SLOT_TILE_BOOTLOADER, SLOT_CC_MODE = range(6)
SLOT_NAMES = {SLOT_SBL: "secondary-bootloader", SLOT_ICU: "icu-firmware", SLOT_CCE: "cce",
              SLOT_CONFIG: "ipu-config", SLOT_TILE_BOOTLOADER: "tile-bootloader",
              SLOT_CC_MODE: "cc-mode"}
SLOT_OWNERS = ("pbl", "sbl", "sbl") + ("cce",) * (SLOTS - 3)


def measure(data: bytes) -> bytes:
    """The measurement of a firmware image or register block: its SHA-384."""
    return hashlib.sha384(data).digest()


def extend_value(old: bytes, measurement: bytes) -> bytes:
    """SHA-384(old ‖ measurement): the value of a slot after one extend."""
    return hashlib.sha384(old + measurement).digest()


def config_measurement(trusted_mode: bool = True) -> bytes:
    """Measurement of the IPU configuration register the CCU writes to enter trusted mode.

    The register block is encoded as a label and one byte per bit we model (trusted mode),
    so a manufacturer can publish the reference value without running the model."""
    return measure(b"ITX-IPU-CONFIG\x00" + bytes([int(trusted_mode)]))


def cc_mode_measurement(mode) -> bytes:
    """Measurement of the active confidential-computing mode (``hw.cc.layout.Mode``: off 0,
    on 1, devtools 2), as read from ``cc_ctrl``'s ``mode`` port or ``CC_MODE.active``.

    Encoded like :func:`config_measurement` (a label and the 2-bit code in one byte), so a
    verifier can compute the value it expects for the mode it requires."""
    code = int(getattr(mode, "value", mode))
    if not 0 <= code <= 3:
        raise ValueError(f"a CC mode is a 2-bit code, not {mode!r}")
    return measure(b"H100-CC-MODE\x00" + bytes([code]))


class MeasurementStore:
    """64 extend-only slots with fixed owners; :meth:`reset` is the device reset only.

    A slot is an int 0..63: :meth:`read`, :meth:`owner` and :meth:`extend` raise
    :class:`~sw.ccu.errors.SlotOwnerError` for any other value (out of range, not an int, a
    bool), and change nothing."""

    def __init__(self, owners=SLOT_OWNERS):
        if len(owners) != SLOTS:
            raise ValueError(f"need {SLOTS} slot owners, got {len(owners)}")
        self._owners = tuple(owners)
        self._slots = [bytes(DIGEST_SIZE)] * SLOTS

    @staticmethod
    def _check_slot(slot):
        if isinstance(slot, bool) or not isinstance(slot, int) or not 0 <= slot < SLOTS:
            raise SlotOwnerError(f"no measurement slot {slot!r} (there are {SLOTS}: 0..{SLOTS - 1})")

    def owner(self, slot: int) -> str:
        """The layer that owns *slot* (SlotOwnerError: no such slot)."""
        self._check_slot(slot)
        return self._owners[slot]

    def extend(self, owner: str, slot: int, measurement: bytes) -> bytes:
        """Extend ``slot`` by ``measurement`` (a 48-byte digest) on behalf of ``owner``:
        SlotOwnerError if there is no such slot or ``owner`` does not own it, ValueError if
        the measurement is not 48 bytes."""
        self._check_slot(slot)
        if owner != self._owners[slot]:
            raise SlotOwnerError(f"slot {slot} is owned by {self._owners[slot]!r}, "
                                 f"not {owner!r}")
        if len(measurement) != DIGEST_SIZE:
            raise ValueError(f"a measurement is {DIGEST_SIZE} bytes, got {len(measurement)}")
        self._slots[slot] = extend_value(self._slots[slot], bytes(measurement))
        return self._slots[slot]

    def read(self, slot: int) -> bytes:
        """The value of *slot* (SlotOwnerError: no such slot; a negative index is not one)."""
        self._check_slot(slot)
        return self._slots[slot]

    def values(self) -> tuple[bytes, ...]:
        """All 64 slot values, in slot order (what the attestation report carries)."""
        return tuple(self._slots)

    def reset(self):
        """Device reset: every slot back to zero. Nothing else may call this."""
        self._slots = [bytes(DIGEST_SIZE)] * SLOTS
