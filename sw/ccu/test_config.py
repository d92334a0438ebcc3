"""The CCU checks the SXP configuration it runs: the manifest's configuration is validated
in software before anything is written (register widths, the SXP's consistency rules),
written whole before trusted mode, read back once trusted, and bound into the report's
manifest hash, which the relying party checks against its own manifest.

Independent references: the register widths and reset values come from the RTL's register
map (``hw.sxp.regs.register_map``), the consistency rule from the SXP golden model
(``sw.sxp.model.SxpModel.config_ok``), bad manifests are written out by hand."""
import dataclasses
import hashlib
import random

import pytest

from sw.ccu import (
    ManifestError,
    ManifestMismatchError,
    RecordingSxpPort,
    SxpRegister,
    TeeState,
    TrustedModeError,
)
from sw.ccu.manifest import ConfigWrite
from sw.ccu.report import AttestationReport, split_signed_report
from sw.ccu.sxp_port import REGISTER_ENTRIES, REGISTER_WIDTHS, config_entries, reset_value
from sw.ccu.testing import certificates

B, L = SxpRegister.KSELLIMIT_BASE, SxpRegister.KSELLIMIT_LIMIT
KX, KP = SxpRegister.KXBCTXMAP, SxpRegister.KPHYSMAP


def with_config(manifest, *writes):
    return dataclasses.replace(manifest, sxp_config=tuple(ConfigWrite(*w) for w in writes))


# Each: the manifest's configuration, the ManifestError it must raise.
BAD_CONFIGS = {
    "two contexts on one region": (
        ((KP, 0, 3), (KP, 1, 3)), r"KPHYSMAP\[0\] and KPHYSMAP\[1\] both map to region 3"),
    "context onto the reset map of another": (
        ((KP, 0, 2),), r"KPHYSMAP\[0\] and KPHYSMAP\[1\] both map to region 2"),
    "cleartext region overlaps a key region": (
        ((B, 0, 0x1800_0000), (L, 0, 0x1800_1000), (B, 1, 0x1000_0000), (L, 1, 0x2000_0000)),
        r"region 0 \[0x18000000, 0x18001000\) overlaps region 1 .*cleartext"),
    "two key regions overlap by one byte": (
        ((B, 1, 0x1000), (L, 1, 0x2001), (B, 2, 0x2000), (L, 2, 0x3000)),
        r"region 1 .* overlaps region 2"),
    "64-bit region base": (
        ((B, 1, (1 << 32) + 0x1000_0000), (L, 1, 0x2000_0000)),
        r"KSELLIMIT_BASE\[1\] = 4563402752 does not fit the register's 32 bits"),
    "64-bit region limit": (((L, 3, 1 << 32),), r"KSELLIMIT_LIMIT\[3\] .* 32 bits"),
    "context map over 4 bits": (((KX, 2, 16),), r"KXBCTXMAP\[2\] = 16 .* 4 bits"),
    "region id over 5 bits": (((KP, 2, 32),), r"KPHYSMAP\[2\] = 32 .* 5 bits"),
    "region id 0 (cleartext)": (((KP, 4, 0),), r"KPHYSMAP\[4\] = 0 is not a key region"),
    "region id 17 (fits 5 bits)": (((KP, 4, 17),), r"KPHYSMAP\[4\] = 17 is not a key region"),
    "negative value": (((B, 1, -1),), r"does not fit"),
    "boolean value": (((KX, 1, True),), r"does not fit"),
    "entry 17 of KPHYSMAP": (((KP, 16, 17),), r"KPHYSMAP has no entry 16"),
    "no such register": (((4, 0, 0),), r"no SXP register 4"),
    "entry written twice": (((B, 1, 0), (B, 1, 0x1000)), r"KSELLIMIT_BASE\[1\] is written twice"),
}


@pytest.mark.parametrize("name", BAD_CONFIGS)
def test_bad_configuration_is_refused_before_any_write(device, manifest, identities, name):
    """Each refused with ManifestError by create_tee before the port sees anything: no
    configuration write, no trusted-mode request, no key; the TEE stays READY."""
    writes, match = BAD_CONFIGS[name]
    bad = with_config(manifest, *writes)
    with pytest.raises(ManifestError, match=match):
        bad.validate()
    port = device.port
    before = dict(port.config)
    with pytest.raises(ManifestError, match=match):
        device.cce.create_tee(bad, certificates(identities))
    assert port.log == [], f"the port saw {port.log[:3]}… before the manifest was refused"
    assert port.config == before and not port.trusted and device.cce.state is TeeState.READY


def test_widths_and_reset_values_are_the_registers():
    """REGISTER_WIDTHS, REGISTER_ENTRIES and reset_value against the RTL's register map."""
    from hw.sxp.regs import register_map
    regmap = register_map(16)
    names = {KX: "KXBCTXMAP", KP: "KPHYSMAP", B: "KSEL_BASE", L: "KSEL_LIMIT"}
    for reg, name in names.items():
        entries = [r for r in regmap if r.name.rstrip("0123456789") == name]
        assert len(entries) == REGISTER_ENTRIES[reg]
        for i in range(REGISTER_ENTRIES[reg]):
            (field,) = regmap[f"{name}{i}"].fields
            assert field.width == REGISTER_WIDTHS[reg], f"{name}{i}"
            assert field.reset == reset_value(reg, i), f"{name}{i}"


def test_cause_config_is_the_sxps():
    from hw.sxp.regs import Cause
    from sw.ccu.sxp_port import CAUSE_CONFIG
    assert CAUSE_CONFIG == Cause.CONFIG.value


def test_software_check_agrees_with_the_sxp_model(manifest):
    """Random configurations (colliding KPHYSMAP entries, overlapping and empty regions,
    each region's bounds on a small grid so that overlaps are frequent): the manifest is
    valid exactly when the SXP golden model, programmed with the same configuration,
    accepts trusted mode."""
    from sw.sxp.driver import ModelBus, SxpCsrDriver
    from sw.sxp.model import SxpModel
    rng = random.Random(37)
    verdicts = set()
    for _ in range(400):
        writes = []
        for p in rng.sample(range(16), rng.randrange(4)):
            writes.append((KP, p, rng.randrange(0, 18)))
        for r in rng.sample(range(17), rng.randrange(6)):
            base = rng.randrange(0, 16) * 0x1000
            writes += [(B, r, base), (L, r, base + rng.randrange(-2, 6) * 0x1000 if base else 0x3000)]
        m = with_config(manifest, *[(g, i, max(v, 0)) for g, i, v in writes])
        try:
            m.validate()
            valid = True
        except ManifestError:
            valid = False
        model = SxpModel(16)
        driver = SxpCsrDriver(ModelBus(model, "ccu"))
        for g, i, v in writes:
            driver.write_config(g, i, max(v, 0))
        assert valid == model.config_ok(), writes
        verdicts.add(valid)
    assert verdicts == {True, False}


def test_configuration_is_written_before_trust_and_read_back(device, manifest, identities):
    """Whatever the host programmed before is overwritten (entries the manifest does not
    name go back to their reset values); no configuration write follows the trusted-mode
    request, and the configuration is locked afterwards."""
    port = device.port
    port.host_write(B, 7, 0x4000_0000)          # a cleartext-looking region the manifest
    port.host_write(L, 7, 0x5000_0000)          # does not have
    port.host_write(KX, 3, 9)
    device.cce.create_tee(manifest, certificates(identities))
    trust = port.log.index(("trusted",))
    assert all(e[0] == "config" for e in port.log[:trust]) and len(port.log) == trust + 1
    assert port.config[B, 7] == port.config[L, 7] == port.config[KX, 3] == 0
    assert port.config[B, 1] == 0x1000_0000 and port.config[L, 1] == 0x2000_0000
    assert not port.host_write(B, 7, 0x4000_0000) and port.denied == 1
    with pytest.raises(ValueError, match="trusted mode"):
        port.write_config(B, 7, 0x4000_0000)


class ChangingPort(RecordingSxpPort):
    """The untrusted host writes *writes* in the window between the CCU's configuration
    writes and its trusted-mode request (a race the SXP cannot see)."""

    def __init__(self, writes):
        super().__init__()
        self.race = list(writes)

    def set_trusted_mode(self):
        for w in self.race:
            self.host_write(*w)
        self.race = []
        super().set_trusted_mode()


class MisreadingPort(RecordingSxpPort):
    """Reads entry *entry* back as *value* (what a CCU that attested the manifest's copy
    instead of the SXP's would never notice)."""

    def __init__(self, entry, value):
        super().__init__()
        self.entry, self.value = entry, value

    def read_config(self, register, index):
        if (register, index) == self.entry:
            return self.value
        return super().read_config(register, index)


def report_manifest_hash(device):
    body, _ = split_signed_report(device.cce.get_attestation_report().report)
    return AttestationReport.decode(body).manifest_hash


@pytest.mark.parametrize("port, why", [
    (lambda: ChangingPort([(B, 1, 0x1800_0000)]), "a named entry changed by the host"),
    (lambda: ChangingPort([(B, 9, 0x3000_0000), (L, 9, 0x3000_1000)]),
     "an extra region the manifest does not have"),
    (lambda: ChangingPort([(KX, 5, 1)]), "an exchange context remapped"),
    (lambda: MisreadingPort((L, 1), 0x2000_1000), "a named entry reads back otherwise"),
    (lambda: MisreadingPort((KP, 0), None), "a named entry the SXP does not have"),
], ids=lambda x: x if isinstance(x, str) else "")
def test_report_over_another_live_configuration_is_rejected(ca, bundle, identities, parties,
                                                            manifest, port, why):
    """The live configuration differs from the manifest's but is consistent, so trusted
    mode is entered and the report is signed; every party rejects it (ManifestMismatchError
    on the manifest hash), and the hash is the manifest's for the same flow on an honest
    port."""
    from sw.ccu.device import Device
    dev = Device(bundle, ca.firmware_public_key, port(), trng=lambda n: bytes(n))
    ca.provision(dev)
    dev.cce.create_tee(manifest, certificates(identities))
    assert dev.port.trusted
    assert report_manifest_hash(dev) != hashlib.sha384(manifest.encode()).digest(), why
    for p in parties.values():
        with pytest.raises(ManifestMismatchError, match="manifest hash"):
            p.verify(dev.cce.get_attestation_report())


def test_report_over_the_manifests_configuration_is_accepted(device, manifest, identities,
                                                              parties):
    device.cce.create_tee(manifest, certificates(identities))
    assert report_manifest_hash(device) == hashlib.sha384(manifest.encode()).digest()
    for p in parties.values():
        p.verify(device.cce.get_attestation_report())


def test_live_hash_of_a_smaller_sxp(manifest):
    """An SXP with 4 contexts has no KPHYSMAP 4..15 (read back None): the hash is still the
    manifest's when the manifest does not name them, and differs when it names one; a
    region entry missing always changes it."""
    live = dict(manifest.configuration())
    for p in range(4, 16):
        live[KP, p] = None
    assert manifest.hash(live) == manifest.hash()
    gap = dict(manifest.configuration())
    gap[B, 9] = None                            # a region register the port could not read
    assert manifest.hash(gap) != manifest.hash()
    named = with_config(manifest, (KP, 5, 6))
    live5 = dict(named.configuration())
    live5[KP, 5] = None
    assert named.hash(live5) != named.hash()


def test_config_writes_cover_every_entry(manifest):
    writes = manifest.config_writes()
    assert [(w.register, w.index) for w in writes] == list(config_entries())
    assert len(writes) == 16 + 16 + 17 + 17


def test_refused_configuration_reaches_no_launch(ca, bundle, identities, manifest):
    """The SXP refuses trusted mode when the host broke the configuration in the window
    (two contexts on one region): TrustedModeError, READY, nothing signed, CONFIG latched."""
    from sw.ccu.device import Device
    dev = Device(bundle, ca.firmware_public_key, ChangingPort([(KP, 3, 1)]),
                 trng=lambda n: bytes(n))
    ca.provision(dev)
    with pytest.raises(TrustedModeError, match="refused trusted mode"):
        dev.cce.create_tee(manifest, certificates(identities))
    assert dev.cce.state is TeeState.READY and not dev.port.trusted and dev.port.irq
    assert dev.port.keys == {}


def test_config_entry_must_be_a_config_write(manifest):
    with pytest.raises(ManifestError, match="is not a ConfigWrite"):
        dataclasses.replace(manifest, sxp_config=((B, 1, 0),)).validate()
