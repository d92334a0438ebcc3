"""The modelled GPU firmware as the RTMs measure it: which RTS slot holds which component,
the component images, and the CC-mode policy measurement.

Slot plan (report index = slot; NVIDIA's RIMs use the same split, VBIOS low, driver
high):

- VBIOS components: slots 0–6 and 8–12 (the VBIOS RIM's active entries);
- driver components: slots 7 and 21–30 (the driver RIM's active entries);
- slot 41: the CC-mode policy, in neither RIM (NVIDIA's rule leaves such slots
  unchecked; the verifier decodes it into the ``cc_mode`` / ``devtools`` claims);
- slot 35 is left unused: NVIDIA's verifier skips index 35 when the report says NVDEC0
  is disabled, as ours does;
- every other slot stays zero.

Each component is measured once: the RTM extends ``SHA-384(image)`` into its slot, so the
slot holds ``SHA-384(0^48 ‖ SHA-384(image))``. The CC-mode RTM extends
``SHA-384("cc-mode:" ‖ mode)`` with mode ``on``, ``devtools`` or ``off``.

:meth:`ModelledFirmware.boot` drives the RTS golden model (:class:`sw.rts.MeasurementStore`);
:meth:`ModelledFirmware.golden` computes the reference values with hashlib directly, so a
RIM written from it does not take its values from the store it is compared against.
"""
import dataclasses
import hashlib

from sw.rts.model import MeasurementStore

__all__ = ["ModelledFirmware", "VBIOS_SLOTS", "DRIVER_SLOTS", "POLICY_SLOT", "CC_MODES", "policy_measurement",
           "policy_value", "decode_policy"]

VBIOS_SLOTS = (0, 1, 2, 3, 4, 5, 6, 8, 9, 10, 11, 12)
DRIVER_SLOTS = (7,) + tuple(range(21, 31))
POLICY_SLOT = 41
CC_MODES = ("on", "devtools", "off")
VBIOS_OWNER, DRIVER_OWNER, POLICY_OWNER = 1, 2, 3


def _extend_from_zero(measurement: bytes) -> bytes:
    return hashlib.sha384(bytes(48) + measurement).digest()


def policy_measurement(mode: str) -> bytes:
    """What the CC-mode RTM extends the policy slot by when the GPU runs in *mode*."""
    if mode not in CC_MODES:
        raise ValueError(f"cc mode must be one of {CC_MODES}, not {mode!r}")
    return hashlib.sha384(b"cc-mode:" + mode.encode()).digest()


def policy_value(mode: str) -> bytes:
    """The policy slot's value after the CC-mode RTM measured *mode*."""
    return _extend_from_zero(policy_measurement(mode))


def decode_policy(value: bytes):
    """(cc_mode, devtools) from the policy slot's value; ("unknown", None) for any other value."""
    for mode in CC_MODES:
        if value == policy_value(mode):
            return ("on" if mode == "devtools" else mode), mode == "devtools"
    return "unknown", None


@dataclasses.dataclass(frozen=True)
class ModelledFirmware:
    """One firmware build. *build* names it (different builds, different images)."""
    build: bytes = b"r1"
    driver_version: str = "550.90.07"       # as the responder's opaque data says
    vbios_version: str = "96.00.9F.00.01"   # opaque VBIOS_VERSION 009f009601000000

    def __post_init__(self):
        if not isinstance(self.build, bytes):
            raise TypeError("build must be bytes")

    def image(self, slot: int) -> bytes:
        kind = "vbios" if slot in VBIOS_SLOTS else "driver" if slot in DRIVER_SLOTS else None
        if kind is None:
            raise ValueError(f"slot {slot} holds no firmware component")
        return b"model %s component %d build %s" % (kind.encode(), slot, self.build)

    def golden(self, kind: str) -> dict:
        """{slot: [value]} for the *kind* ("driver" or "vbios") RIM (hashlib, not the store)."""
        slots = {"vbios": VBIOS_SLOTS, "driver": DRIVER_SLOTS}.get(kind)
        if slots is None:
            raise ValueError("kind is 'driver' or 'vbios'")
        return {s: [_extend_from_zero(hashlib.sha384(self.image(s)).digest())] for s in slots}

    def extends(self, cc_mode: str = "on") -> list:
        """The RTMs' extends of a measured boot, in order: ``[(slot, owner, value)]`` (the
        VBIOS components, the driver components, then the CC-mode policy)."""
        policy = policy_measurement(cc_mode)
        return ([(s, VBIOS_OWNER, hashlib.sha384(self.image(s)).digest()) for s in VBIOS_SLOTS]
                + [(s, DRIVER_OWNER, hashlib.sha384(self.image(s)).digest()) for s in DRIVER_SLOTS]
                + [(POLICY_SLOT, POLICY_OWNER, policy)])

    def boot(self, store: MeasurementStore, cc_mode: str = "on"):
        """The RTMs of a measured boot extend *store*."""
        if not isinstance(store, MeasurementStore):
            raise TypeError("store must be a MeasurementStore")
        for slot, owner, value in self.extends(cc_mode):
            store.extend(slot, owner, value)
        return store
