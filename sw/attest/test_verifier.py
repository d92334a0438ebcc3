"""Our own chain end to end: an SPDM session between the sw.spdm requester and responder
over RTS values from a measured boot of the modelled firmware, our RIMs and our OCSP
responder; the verifier accepts it, and rejects each planted fault with its named failure."""
import dataclasses

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from sw.attest.errors import AttestError, AttestInputError, ReportFormatError
from sw.attest.firmware import DRIVER_SLOTS, POLICY_SLOT, VBIOS_SLOTS, ModelledFirmware
from sw.attest.identity import RimAuthority
from sw.attest.ocsp import OcspClient
from sw.attest.rim import write_rim
from sw.attest.verifier import FAILURE_NAMES, format_vbios_version, parse_report, verify
from sw.spdm.messages import V12


@pytest.fixture(scope="module")
def good(env):
    return env.session()


def run(env, evidence, *, driver_rim=None, vbios_rim=None, nonce=None, policy=None, vca=b""):
    report, chain, sent, _, _ = evidence
    return verify(report, chain, driver_rim or env.driver_rim, vbios_rim or env.vbios_rim,
                  nonce=nonce if nonce is not None else sent, policy=policy or env.policy(), vca=vca)


def test_accepts_our_evidence(env, good):
    verdict = run(env, good)
    assert verdict.ok, verdict.failures
    c = verdict.claims
    assert c["chain"] and c["report_signature"] and c["nonce_match"] and c["measurements_match"]
    assert c["device_ocsp"] == ["good"] * 4 and c["driver_rim_ocsp"] == ["good"] * 2
    assert c["driver_version"] == "550.90.07" and c["vbios_version"] == "96.00.9f.00.01"
    assert (c["cc_mode"], c["devtools"]) == ("on", False)
    assert c["mismatched_indices"] == []
    assert POLICY_SLOT in c["unchecked_indices"] and not set(VBIOS_SLOTS + DRIVER_SLOTS) & set(c["unchecked_indices"])


def test_accepts_spdm_12_with_vca(env):
    evidence = env.session(version=V12)
    assert run(env, evidence, vca=evidence[3]).ok
    assert run(env, evidence).names == {"report_signature"}  # 1.2 signs VCA too: without it, no check


def test_tampered_measurement_rejected(env):
    """The GPU runs other firmware in one driver slot: the RIM value does not match."""
    values, _ = env.rts()
    values[DRIVER_SLOTS[3]] = bytes(48)
    verdict = run(env, env.session(values=values))
    assert verdict.names == {"measurements"} and verdict.claims["mismatched_indices"] == [DRIVER_SLOTS[3]]


def test_other_firmware_build_rejected(env):
    verdict = run(env, env.session(firmware=ModelledFirmware(build=b"r2")))
    assert verdict.names == {"measurements"}
    assert verdict.claims["mismatched_indices"] == sorted(VBIOS_SLOTS + DRIVER_SLOTS)


def test_report_byte_changed_after_signing_rejected(env, good):
    report = bytearray(good[0])
    report[37 + 8 + 7] ^= 1  # first byte of slot 0's value (block header 4, DMTF header 3)
    verdict = run(env, (bytes(report),) + good[1:])
    assert {"report_signature", "measurements"} <= verdict.names


def test_stale_nonce_rejected(env, good):
    older = env.session()
    assert run(env, good, nonce=older[2]).names == {"nonce"}


def test_revoked_attestation_cert_rejected(env):
    from sw.attest.testbed import Env
    own = Env()  # its own responder: revocation must not leak into the other tests
    leaf, issuer = own.device.certificates[-1], own.device.certificates[-2]
    own.ocsp.revoke(leaf, issuer)
    verdict = run(own, own.session())
    assert verdict.names == {"ocsp_device"}
    assert verdict.claims["device_ocsp"][0] == "revoked (key_compromise)"
    # NVIDIA's choice: the leaf is not asked about; then the revocation goes unseen
    assert run(own, own.session(), policy=own.policy(ocsp_leaf=False)).ok


def test_rim_with_wrong_value_rejected(env, good):
    golden = env.firmware.golden("vbios")
    golden[VBIOS_SLOTS[0]] = [bytes(48)]
    rim = write_rim(product="GH100", version=env.firmware.vbios_version, golden=golden, signer=env.signer)
    verdict = run(env, good, vbios_rim=rim)
    assert verdict.names == {"measurements"} and verdict.claims["mismatched_indices"] == [VBIOS_SLOTS[0]]


def test_rim_signed_by_another_authority_rejected(env, good):
    other = RimAuthority(b"someone else").signer()
    rim = write_rim(product="GH100", version=env.firmware.driver_version, golden=env.firmware.golden("driver"),
                    signer=other)
    verdict = run(env, good, driver_rim=rim)
    assert "driver_rim_signature" in verdict.names and verdict.claims["driver_rim_signature"] is False


def test_rim_value_edited_after_signing_rejected(env, good):
    text = env.driver_rim.decode()
    value = env.firmware.golden("driver")[DRIVER_SLOTS[0]][0].hex()
    edited = text.replace(value, "00" * 48, 1).encode()
    assert edited != env.driver_rim
    verdict = run(env, good, driver_rim=edited)
    assert {"driver_rim_signature", "measurements"} == verdict.names


def test_rim_index_conflict_rejected(env, good):
    golden = env.firmware.golden("vbios")
    golden[DRIVER_SLOTS[0]] = env.firmware.golden("driver")[DRIVER_SLOTS[0]]
    rim = write_rim(product="GH100", version=env.firmware.vbios_version, golden=golden, signer=env.signer)
    assert "rim_index_conflict" in run(env, good, vbios_rim=rim).names


def test_version_mismatch_rejected(env, good):
    rim = write_rim(product="GH100", version="555.00", golden=env.firmware.golden("driver"), signer=env.signer)
    assert run(env, good, driver_rim=rim).names == {"driver_version"}


@pytest.mark.parametrize("mode,names", [("devtools", {"devtools"}), ("off", {"cc_mode"})])
def test_cc_mode_and_devtools_are_claims(env, mode, names):
    evidence = env.session(cc_mode=mode)
    verdict = run(env, evidence)
    assert verdict.names == names
    assert verdict.claims["cc_mode"] == ("on" if mode == "devtools" else "off")
    assert verdict.claims["devtools"] is (mode == "devtools")
    if mode == "devtools":
        assert run(env, evidence, policy=env.policy(allow_devtools=True)).ok


def test_chain_to_another_root_rejected(env, good):
    from sw.spdm.identity import Manufacturer
    policy = dataclasses.replace(env.policy(), device_root=Manufacturer(b"other").root)
    verdict = run(env, good, policy=policy)
    assert "chain" in verdict.names and verdict.claims["device_ocsp"] == "not checked (chain invalid)"


def test_ocsp_off_is_visible(env, good):
    verdict = run(env, good, policy=env.policy(ocsp=None))
    assert verdict.ok and verdict.claims["device_ocsp"] == "off" and verdict.claims["vbios_rim_ocsp"] == "off"


def test_ocsp_nonce_replay_rejected(env, good):
    """OCSP answers recorded in one verification and replayed in the next: each is about the
    right certificate, signed and current, but carries the earlier request's nonce."""
    from cryptography.x509 import ocsp
    recorded, replay = {}, []

    def transport(request):
        serial = ocsp.load_der_ocsp_request(request).serial_number
        if replay:
            return recorded[serial]
        recorded[serial] = env.ocsp.respond(request)
        return recorded[serial]
    client = OcspClient(transport)
    first = run(env, good, policy=env.policy(ocsp=client))  # recorded while fresh
    assert first.ok, first.failures
    replay.append(True)
    verdict = run(env, good, policy=env.policy(ocsp=client))
    assert verdict.names == {"ocsp_device", "ocsp_rim"}
    assert verdict.claims["device_ocsp"] == ["invalid"] * 4


def test_certificate_of_unknown_version_is_an_input_error(env, good):
    """A certificate whose version field says 1 (neither v1 nor v3): ``cryptography`` raises
    ``InvalidVersion``, which is not a ValueError; the chain loader reports it as a chain
    format error, and the SPDM requester as a ChainError."""
    from sw.attest.errors import ChainFormatError
    from sw.spdm.errors import ChainError
    from sw.spdm.requester import verify_chain

    v3 = b"\xa0\x03\x02\x01\x02"              # TBSCertificate.version [0] INTEGER 2 (v3)
    assert v3 in good[1]
    chain = good[1].replace(v3, b"\xa0\x03\x02\x01\x01", 1)
    with pytest.raises(ChainFormatError, match="does not parse"):
        verify(good[0], chain, env.driver_rim, env.vbios_rim, nonce=good[2], policy=env.policy(ocsp=None))
    with pytest.raises(ChainError, match="does not parse"):
        verify_chain(chain, env.manufacturer.root)


def test_every_failure_name_is_reachable_or_documented():
    assert len(set(FAILURE_NAMES)) == len(FAILURE_NAMES)


def test_format_vbios_version():
    assert format_vbios_version(bytes.fromhex("009f009601000000")) == "96.00.9f.00.01"


# --- bad input -------------------------------------------------------------------------------

@pytest.mark.parametrize("bad", [None, "report", 7, [1, 2]])
def test_wrong_types_raise_input_error(env, good, bad):
    with pytest.raises(AttestInputError):
        verify(bad, good[1], env.driver_rim, env.vbios_rim, nonce=good[2], policy=env.policy())
    with pytest.raises(AttestInputError):
        verify(good[0], bad, env.driver_rim, env.vbios_rim, nonce=good[2], policy=env.policy())
    with pytest.raises(AttestInputError):
        verify(good[0], good[1], bad, env.vbios_rim, nonce=good[2], policy=env.policy())
    with pytest.raises(AttestInputError):
        verify(good[0], good[1], env.driver_rim, env.vbios_rim, nonce=bad, policy=env.policy())
    with pytest.raises(AttestInputError):
        verify(good[0], good[1], env.driver_rim, env.vbios_rim, nonce=good[2], policy=bad)


def test_truncated_and_garbage_reports_raise(good):
    for cut in (0, 10, 37, 40, len(good[0]) // 2, len(good[0]) - 1):
        with pytest.raises(ReportFormatError):
            parse_report(good[0][:cut])
    with pytest.raises(ReportFormatError):
        parse_report(good[0] + b"\0")
    with pytest.raises(ReportFormatError):
        parse_report(bytes(range(256)) * 8)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_mutated_report_bytes_never_accepted(env, good, data):
    """Any change of the report: a documented input error, or a verdict that is not ok."""
    report = bytearray(good[0])
    n = data.draw(st.integers(1, 4))
    for _ in range(n):
        pos = data.draw(st.integers(0, len(report) - 1))
        report[pos] = data.draw(st.integers(0, 255).filter(lambda b, p=pos: b != report[p]))
    cut = data.draw(st.one_of(st.none(), st.integers(0, len(report))))
    mutated = bytes(report if cut is None else report[:cut])
    assume(mutated != good[0])          # (two changes of one byte can restore it)
    try:
        verdict = verify(mutated, good[1], env.driver_rim, env.vbios_rim, nonce=good[2], policy=env.policy(ocsp=None))
    except AttestError:
        return
    assert not verdict.ok


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_mutated_chain_bytes_never_accepted(env, good, data):
    """Any change of the SPDM certificate chain: a documented input error, or a verdict
    that is not ok (a chain failure, or a report signature that no longer verifies)."""
    chain = bytearray(good[1])
    pos = data.draw(st.integers(0, len(chain) - 1))
    chain[pos] = data.draw(st.integers(0, 255).filter(lambda b: b != good[1][pos]))
    try:
        verdict = verify(good[0], bytes(chain), env.driver_rim, env.vbios_rim, nonce=good[2],
                         policy=env.policy(ocsp=None))
    except AttestError:
        return
    assert not verdict.ok and verdict.names & {"chain", "report_signature"}


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=600))
def test_garbage_reports_raise_input_error(blob):
    with pytest.raises(ReportFormatError):
        parse_report(blob)
