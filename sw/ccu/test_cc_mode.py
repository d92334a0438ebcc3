"""The confidential-computing mode of a device with ``cc_ctrl`` (hw/cc) as a measured value:
create_tee extends slot 5 with the active mode, and a party that requires a mode accepts
a report only from a device in that mode."""
import pytest

from hw.cc.layout import Mode
from sw.ccu import Device, MeasurementMismatchError, RecordingSxpPort, RelyingParty
from sw.ccu.measure import DIGEST_SIZE, SLOT_CC_MODE, cc_mode_measurement, extend_value
from sw.ccu.testing import MODEL, UDS, certificates


def created(ca, bundle, manifest, identities, mode):
    """A provisioned device whose cc_ctrl is in *mode*, after create_tee."""
    active = {"mode": mode}
    device = Device(bundle, ca.firmware_public_key, RecordingSxpPort(),
                    trng=lambda n: UDS[:n], cc_mode=lambda: active["mode"])
    ca.provision(device)
    device.cce.create_tee(manifest, certificates(identities))
    return device, active


def party(ca, reference, identities, manifest, cc_mode):
    key, cert = identities[MODEL]
    return RelyingParty(MODEL, key, cert, ca.certificate, reference, manifest, cc_mode=cc_mode)


def test_measurement_encodes_the_mode():
    values = {m: cc_mode_measurement(m) for m in Mode}
    assert len(set(values.values())) == len(Mode)          # every mode measures differently
    assert all(len(v) == DIGEST_SIZE for v in values.values())
    assert cc_mode_measurement(Mode.ON) == cc_mode_measurement(1)
    with pytest.raises(ValueError):
        cc_mode_measurement(4)


@pytest.mark.parametrize("mode", list(Mode))
def test_create_tee_measures_the_active_mode(ca, bundle, manifest, identities, mode):
    device, _ = created(ca, bundle, manifest, identities, mode)
    want = extend_value(bytes(DIGEST_SIZE), cc_mode_measurement(mode))
    assert device.measurements.values()[SLOT_CC_MODE] == want


@pytest.mark.parametrize("required", list(Mode))
@pytest.mark.parametrize("actual", list(Mode))
def test_party_accepts_only_the_mode_it_requires(ca, bundle, reference, manifest, identities,
                                                 required, actual):
    device, _ = created(ca, bundle, manifest, identities, actual)
    verifier = party(ca, reference, identities, manifest, required)
    evidence = device.cce.get_attestation_report()
    if required == actual:
        verifier.verify(evidence)
    else:
        with pytest.raises(MeasurementMismatchError, match="slot 5 \\(cc-mode\\)"):
            verifier.verify(evidence)


def test_mode_is_read_at_create_tee(ca, bundle, reference, manifest, identities):
    # the mode the device is in when the TEE is created is what the report carries: a
    # device switched to devtools afterwards (effective only at its next reset) still
    # attests ON, and after the reset that makes devtools active it attests devtools
    device, active = created(ca, bundle, manifest, identities, Mode.ON)
    active["mode"] = Mode.DEVTOOLS
    party(ca, reference, identities, manifest, Mode.ON).verify(device.cce.get_attestation_report())
    device.reset()
    device.cce.create_tee(manifest, certificates(identities))
    with pytest.raises(MeasurementMismatchError, match="cc-mode"):
        party(ca, reference, identities, manifest, Mode.ON).verify(
            device.cce.get_attestation_report())


def test_device_without_cc_ctrl_keeps_the_slot_zero(device, manifest, identities):
    device.cce.create_tee(manifest, certificates(identities))
    assert device.measurements.values()[SLOT_CC_MODE] == bytes(DIGEST_SIZE)
