"""Measurement storage: SHA-384 extend against hashlib, owners, reset only by the device."""
import hashlib

import pytest

from sw.ccu import MeasurementStore, SlotOwnerError
from sw.ccu.measure import SLOT_OWNERS

Z = bytes(48)


def h(*parts):
    return hashlib.sha384(b"".join(parts)).digest()


def test_extend_is_sha384_of_old_and_new():
    store = MeasurementStore()
    m1, m2 = h(b"one"), h(b"two")
    store.extend("cce", 40, m1)
    store.extend("cce", 40, m2)
    assert store.read(40) == h(h(Z, m1), m2)
    assert store.values() == tuple(h(h(Z, m1), m2) if i == 40 else Z for i in range(64))


@pytest.mark.parametrize("owner, slot", [("cce", 0), ("sbl", 3), ("pbl", 1), ("host", 63),
                                         ("cce", 64), ("cce", -1)])
def test_only_the_owner_extends(owner, slot):
    store = MeasurementStore()
    before = store.values()
    with pytest.raises(SlotOwnerError, match=f"slot {slot}|no measurement slot"):
        store.extend(owner, slot, h(b"x"))
    assert store.values() == before


def test_bad_measurement_length_changes_nothing():
    store = MeasurementStore()
    with pytest.raises(ValueError, match="48 bytes"):
        store.extend("cce", 5, b"short")
    assert store.values() == (Z,) * 64


def test_slot_owners():
    assert len(SLOT_OWNERS) == 64 and SLOT_OWNERS[:5] == ("pbl", "sbl", "sbl", "cce", "cce")
    assert not hasattr(MeasurementStore, "reset_slot")      # no per-slot reset at all


def test_device_boot_and_reset(device, bundle, manifest, identities):
    from sw.ccu.testing import certificates
    boot = device.measurements.values()
    assert boot[0] == h(Z, h(bundle.sbl.code))
    assert boot[1] == h(Z, h(bundle.icu_firmware))
    assert boot[2] == h(Z, h(bundle.cce.code))
    assert boot[3:] == (Z,) * 61
    device.cce.create_tee(manifest, certificates(identities))
    created = device.measurements.values()
    assert created[3] == h(Z, h(b"ITX-IPU-CONFIG\x00\x01"))
    assert created[4] == h(Z, h(bundle.tile_bootloader))
    device.reset()                            # the only way back: same values as a boot
    assert device.measurements.values() == boot
