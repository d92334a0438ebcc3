"""Measured boot: derivations against an RFC 5869 HKDF written in the test, determinism,
scrubbing of every secret, firmware authentication, X.509 contents."""
import hashlib

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec

from sw.ccu import Device, FirmwareAuthError, RecordingSxpPort, UdsLockedError
from sw.ccu.certs import MEASUREMENT_OID
from sw.ccu.dice import PrimaryBootloader, SecondaryBootloader, UdsRegion
from sw.ccu.firmware import FirmwareBundle
from sw.ccu.measure import MeasurementStore
from sw.ccu.testing import UDS, firmware, leftover_secrets, make_device, reference_identity


def pub(scalar):
    return ec.derive_private_key(scalar, ec.SECP384R1()).public_key().public_numbers()


def boot_keys(dev):
    c = dev.certificates
    return (c.cik_csr.public_key().public_numbers(),
            c.pik_certificate.public_key().public_numbers(),
            c.ak_certificate.public_key().public_numbers())


def test_keys_match_independent_derivation(device, bundle):
    ref = reference_identity(UDS, bundle.sbl.code, bundle.cce.code)
    assert boot_keys(device) == (pub(ref["cik"]), pub(ref["pik"]), pub(ref["ak"]))
    assert device.cik_certificate.public_key().public_numbers() == pub(ref["cik"])


def test_determinism(ca, bundle):
    a, b = make_device(ca, bundle), make_device(ca, bundle)
    assert boot_keys(a) == boot_keys(b)
    before = boot_keys(a)
    a.reset()
    assert boot_keys(a) == before                               # and across resets
    other = make_device(ca, bundle, uds=bytes(48))
    assert all(x != y for x, y in zip(boot_keys(a), boot_keys(other)))
    new_sbl = make_device(ca, firmware(ca, sbl=b"secondary bootloader v2"))
    cik, pik, ak = boot_keys(new_sbl)
    assert cik == boot_keys(a)[0] and pik != boot_keys(a)[1] and ak != boot_keys(a)[2]
    new_cce = make_device(ca, firmware(ca, cce=b"cce v2"))
    assert boot_keys(new_cce)[:2] == boot_keys(a)[:2] and boot_keys(new_cce)[2] != boot_keys(a)[2]


def test_uds_drawn_once_and_locked(ca, bundle):
    draws = []
    dev = Device(bundle, ca.firmware_public_key, RecordingSxpPort(),
                 trng=lambda n: draws.append(n) or UDS[:n])
    first = (dev.power_on(), boot_keys(dev))[1]
    dev.reset()
    dev.reset()
    assert draws == [48] and boot_keys(dev) == first
    with pytest.raises(UdsLockedError):
        dev._uds.read(lambda n: bytes(n))        # the primary bootloader locked it


def test_no_secret_reachable_after_boot(device, bundle):
    ref = reference_identity(UDS, bundle.sbl.code, bundle.cce.code)
    secrets = {"uds": UDS, "hdi": ref["hdi"], "cdi": ref["cdi"]}
    scalars = {"cik": ref["cik"], "pik": ref["pik"], "ak": ref["ak"]}
    # The walker can fail: it sees the UDS in its flash region and the AK in the CCE ...
    assert leftover_secrets(device, secrets, scalars) == ["ak", "uds"]
    # ... which are the only places they may be.
    assert leftover_secrets(device, secrets, scalars, skip=[device._uds]) == ["ak"]
    assert leftover_secrets(device, secrets, scalars,
                            skip=[device._uds, device.cce._ak]) == []


def test_layers_hand_over_only_what_they_must(ca, bundle):
    ref = reference_identity(UDS, bundle.sbl.code, bundle.cce.code)
    region, store = UdsRegion(), MeasurementStore()
    pbl = PrimaryBootloader(region, ca.firmware_public_key, store, lambda n: UDS[:n])
    handover = pbl.run(bundle.sbl)
    hdi, cdi = handover.hdi, handover.cdi
    assert (bytes(hdi), bytes(cdi)) == (ref["hdi"], ref["cdi"])
    assert region.locked
    assert leftover_secrets(pbl, {"uds": UDS}, {}, skip=[region]) == []
    sbl = SecondaryBootloader(handover, ca.firmware_public_key, store)
    out = sbl.run(bundle.cce, bundle.icu_firmware)
    assert hdi == bytearray(48) and cdi == bytearray(48)          # zeroed in place
    assert handover.hdi is None and handover.cdi is None and vars(sbl)["_in"] is None
    secrets = {"uds": UDS, "hdi": ref["hdi"], "cdi": ref["cdi"]}
    scalars = {"cik": ref["cik"], "pik": ref["pik"], "ak": ref["ak"]}
    assert leftover_secrets([pbl, sbl, handover], secrets, scalars, skip=[region]) == []
    assert leftover_secrets(out, secrets, scalars) == ["ak"]     # the CCE's only secret


def test_badly_signed_firmware_refused_before_the_uds_is_read(ca, bundle):
    from sw.ccu import ManufacturerCA
    rogue = ManufacturerCA().bundle(b"secondary bootloader v1", b"cce v1", b"i", b"t")
    for bad in (rogue,                                               # foreign key
                FirmwareBundle(bundle.cce, bundle.cce, b"i", b"t"),  # CCE as SBL
                FirmwareBundle(bundle.sbl, rogue.cce, b"i", b"t")):  # foreign CCE
        draws = []
        dev = Device(bad, ca.firmware_public_key, RecordingSxpPort(),
                     trng=lambda n: draws.append(n) or UDS[:n])
        with pytest.raises(FirmwareAuthError, match="cce|secondary-bootloader"):
            dev.power_on()
        assert dev.cce is None
        if bad.sbl is not bundle.sbl:     # SBL refused: the UDS was never sampled
            assert draws == [] and not dev._uds.locked


def _measurement_der(items):
    """The extension value built byte by byte from the ASN.1 in docs/ccu.md."""
    def tlv(tag, c):
        return bytes([tag, len(c)]) + c if len(c) < 128 else \
            bytes([tag, 0x81, len(c)]) + c if len(c) < 256 else bytes([tag, 0x82]) + \
            len(c).to_bytes(2, "big") + c
    sha384 = bytes.fromhex("0609608648016503040202")
    return tlv(0x30, b"".join(tlv(0x30, tlv(0x0C, n.encode()) + sha384 + tlv(0x04, d))
                              for n, d in items))


def test_certificates(device, ca, bundle):
    c = device.certificates
    m = {n: hashlib.sha384(x).digest() for n, x in
         (("sbl", bundle.sbl.code), ("icu", bundle.icu_firmware), ("cce", bundle.cce.code))}
    assert c.cik_csr.is_signature_valid and c.pik_csr.is_signature_valid
    c.pik_certificate.verify_directly_issued_by(device.cik_certificate)
    c.ak_certificate.verify_directly_issued_by(c.pik_certificate)
    device.cik_certificate.verify_directly_issued_by(ca.certificate)
    pik_ext = _measurement_der([("secondary-bootloader", m["sbl"]), ("icu-firmware", m["icu"])])
    for obj in (c.pik_csr, c.pik_certificate, device._store.ca_pik_certificate):
        assert obj.extensions.get_extension_for_oid(MEASUREMENT_OID).value.value == pik_ext
    ak_ext = c.ak_certificate.extensions.get_extension_for_oid(MEASUREMENT_OID)
    assert ak_ext.value.value == _measurement_der([("cce", m["cce"])]) and not ak_ext.critical
    bc = c.ak_certificate.extensions.get_extension_for_class(x509.BasicConstraints).value
    assert not bc.ca
    device._store.ca_pik_certificate.verify_directly_issued_by(ca.certificate)
