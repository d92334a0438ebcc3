"""CCU API state machine: out-of-order calls and bad create_tee/launch input raise their
own error and change nothing (state, SXP port log, measurement slots)."""
import dataclasses

import pytest

from sw.ccu import (
    ApiOrderError,
    CcuPort,
    ExceptionCause,
    ExceptionSource,
    IncompleteKeysError,
    KeyInstall,
    ManifestError,
    PartyCertificateError,
    RecordingSxpPort,
    SxpKeyPort,
    TeeState,
)
from sw.ccu.testing import DATA, MODEL, certificates, make_device, make_identities


def snapshot(device):
    return device.cce.state, list(device.port.log), device.measurements.values()


def refused(device, exc, match, call, *args):
    before = snapshot(device)
    with pytest.raises(exc, match=match):
        call(*args)
    assert snapshot(device) == before


def to_state(device, state, parties, party_keys, manifest, identities):
    cce = device.cce
    if state is TeeState.READY:
        return
    cce.create_tee(manifest, certificates(identities))
    if state is TeeState.CREATED:
        return
    ev = cce.get_attestation_report()
    for pid, p in parties.items():
        cce.submit_key_package(p.wrap_keys(p.verify(ev), party_keys[pid]))
    cce.launch()
    if state is TeeState.BOOTING:
        return
    cce.start_main(manifest.binary_measurement)
    if state is TeeState.TERMINATED:
        cce.terminate()
    elif state is TeeState.STOPPED:
        cce.on_exception(ExceptionCause(ExceptionSource.SXP, code=3))
    assert cce.state is state


LIVE = {TeeState.CREATED, TeeState.BOOTING, TeeState.RUNNING}

CALLS = {  # call name -> the states that allow it
    "create_tee": {TeeState.READY},
    "get_attestation_report": LIVE,
    "submit_key_package": {TeeState.CREATED},
    "launch": {TeeState.CREATED},
    "start_main": {TeeState.BOOTING},
    "next_key_set": {TeeState.RUNNING},
    "terminate": LIVE | {TeeState.STOPPED},
}


OUT_OF_ORDER = [(call, s) for call, ok in CALLS.items() for s in TeeState if s not in ok]


@pytest.mark.parametrize("call, state", OUT_OF_ORDER,
                         ids=[f"{c}-{s.value}" for c, s in OUT_OF_ORDER])
def test_calls_out_of_order(device, parties, party_keys, manifest, identities, call, state):
    to_state(device, state, parties, party_keys, manifest, identities)
    args = {"create_tee": (manifest, certificates(identities)),
            "submit_key_package": (b"\x00" * 200,),
            "start_main": (manifest.binary_measurement,)}.get(call, ())
    refused(device, ApiOrderError, f"{call}\\(\\) is not allowed in state {state.value}",
            getattr(device.cce, call), *args)


def test_launch_needs_every_party(created, parties, party_keys):
    ev = created.cce.get_attestation_report()
    p = parties[MODEL]
    created.cce.submit_key_package(p.wrap_keys(p.verify(ev), party_keys[MODEL]))
    refused(created, IncompleteKeysError, r"no key package yet from party \[2\]",
            created.cce.launch)


def test_launch_needs_every_scheduled_key(created, parties, party_keys):
    ev = created.cce.get_attestation_report()
    for pid, p in parties.items():
        keys = dict(party_keys[pid])
        if pid == DATA:
            keys.pop(min(keys))                       # DATA_KEY_A, used by key set 1
        created.cce.submit_key_package(p.wrap_keys(p.verify(ev), keys))
    refused(created, IncompleteKeysError, r"scheduled key ids \[20\]", created.cce.launch)


def test_create_tee_with_wrong_certificates(device, manifest, identities):
    stranger = make_identities(3)[3][1]
    mine = certificates(identities)
    for certs, match in (([mine[0]], "party 2's fingerprint"),
                         (mine + [stranger], "1 certificate\\(s\\) belong to no party"),
                         ([mine[0], stranger], "party 2's fingerprint"),
                         (mine + [b"\x30\x03junk"], "does not parse")):
        refused(device, PartyCertificateError, match, device.cce.create_tee, manifest, certs)
    assert not device.port.trusted


@pytest.mark.parametrize("change, match", [
    (dict(job_id=b"short"), "job id is 5 bytes"),
    (dict(parties=()), "at least one party"),
    (dict(key_sets=()), "at least the launch key set"),
    (dict(key_sets=((KeyInstall(16, 10),),)), "exceed 15"),
    (dict(key_sets=((KeyInstall(0, 99),),)), "key id 99 is supplied by no party"),
])
def test_create_tee_with_a_bad_manifest(device, manifest, identities, change, match):
    refused(device, ManifestError, match, device.cce.create_tee,
            dataclasses.replace(manifest, **change), certificates(identities))


def test_create_tee_on_an_unprovisioned_device(ca, bundle, manifest, identities):
    dev = make_device(ca, bundle, provision=False)
    dev.power_on()
    refused(dev, ApiOrderError, "not provisioned|no CIK certificate", dev.cce.create_tee,
            manifest, certificates(identities))


def test_every_state_is_reachable_and_covered(device, parties, party_keys, manifest,
                                              identities):
    assert {s for _, s in OUT_OF_ORDER} == set(TeeState)     # each state refuses something
    for state in TeeState:
        device.reset()
        to_state(device, state, parties, party_keys, manifest, identities)


def test_recording_port_is_an_sxp_key_port():
    assert isinstance(RecordingSxpPort(), SxpKeyPort)
    assert isinstance(RecordingSxpPort(), CcuPort)
    assert not isinstance(object(), SxpKeyPort)
    with pytest.raises(ValueError):
        RecordingSxpPort().install_key(16, bytes(32))
