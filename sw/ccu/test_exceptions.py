"""The CCE's checks of the running device: the tile bootloader's measurement of the binary
against the manifest before main execution (start_main), the exception pin (on_exception:
stop the job, hold the tiles, log the cause), and the trusted-mode bit read from the port
for the attestation report."""
import hashlib
import os

import pytest

from sw.ccu import (
    ApiOrderError,
    BinaryMeasurementError,
    ExceptionCause,
    ExceptionSource,
    TeeState,
    TrustedModeError,
)
from sw.ccu.testing import DATA, MODEL, UDS, certificates, leftover_secrets, reference_identity

# What the tile bootloader measures of the binary make_manifest's job loads (the manifest
# is built from the same bytes, independently of this value).
LOADED_BINARY = hashlib.sha384(b"ipu binary").digest()
Z = bytes(48)


def launched(device, parties, party_keys, manifest, identities, nonces=None):
    """create_tee → both parties verify and wrap → launch (state BOOTING)."""
    cce = device.cce
    cce.create_tee(manifest, certificates(identities))
    ev = cce.get_attestation_report()
    for pid, p in parties.items():
        cce.submit_key_package(p.wrap_keys(p.verify(ev), party_keys[pid],
                                           nonce=None if nonces is None else nonces[pid]))
    cce.launch()
    assert cce.state is TeeState.BOOTING
    return cce


def installed_contexts(port):
    return {ctx for kind, *rest in port.log if kind == "key" for ctx in rest[:1]}


def all_secrets(party_keys, nonces):
    out = {f"key{k}": v for d in party_keys.values() for k, v in d.items()}
    return out | {f"nonce{pid}": n for pid, n in nonces.items()}


def refused_everything(cce, manifest, identities):
    for call, args in (("create_tee", (manifest, certificates(identities))),
                       ("get_attestation_report", ()), ("submit_key_package", (bytes(200),)),
                       ("launch", ()), ("start_main", (LOADED_BINARY,)),
                       ("next_key_set", ())):
        with pytest.raises(ApiOrderError, match=f"{call}\\(\\) is not allowed in state stopped"):
            getattr(cce, call)(*args)


def assert_stopped(device, party_keys, nonces, bundle, contexts):
    """Tiles held, every context the TEE used reads zero, no secret reachable."""
    port, cce = device.port, device.cce
    assert cce.state is TeeState.STOPPED and port.held
    assert contexts and {ctx: port.keys[ctx] for ctx in contexts} == \
        {ctx: bytes(32) for ctx in contexts}
    ak = reference_identity(UDS, bundle.sbl.code, bundle.cce.code)["ak"]
    assert leftover_secrets(cce, all_secrets(party_keys, nonces), {"ak": ak},
                            skip=[port]) == []


# --- the binary's measurement before main ---------------------------------------------


def test_matching_measurement_starts_main(device, parties, party_keys, manifest, identities):
    cce = launched(device, parties, party_keys, manifest, identities)
    with pytest.raises(ApiOrderError, match="next_key_set.*booting"):
        cce.next_key_set()                  # no synchronisation point before main
    cce.start_main(LOADED_BINARY)
    assert cce.state is TeeState.RUNNING and not device.port.held
    assert cce.next_key_set() == 1 and device.exception_log == ()


@pytest.mark.parametrize("flip", [0, 17, 47])
def test_one_flipped_byte_is_refused(device, parties, party_keys, manifest, identities,
                                     bundle, flip):
    nonces = {MODEL: os.urandom(32), DATA: os.urandom(32)}
    cce = launched(device, parties, party_keys, manifest, identities, nonces)
    bad = bytearray(LOADED_BINARY)
    bad[flip] ^= 0x01
    contexts = installed_contexts(device.port)
    with pytest.raises(BinaryMeasurementError, match="main execution refused"):
        cce.start_main(bytes(bad))
    assert_stopped(device, party_keys, nonces, bundle, contexts)
    (event,) = device.exception_log
    assert (event.sequence, event.cause.source, event.state, event.job_id, event.stopped) == \
        (1, ExceptionSource.MEASUREMENT, TeeState.BOOTING, manifest.job_id, True)
    refused_everything(cce, manifest, identities)


@pytest.mark.parametrize("measurement", [LOADED_BINARY[:47], LOADED_BINARY + b"\0", b"",
                                         "not bytes", None])
def test_malformed_measurement_is_refused(device, parties, party_keys, manifest, identities,
                                          measurement):
    cce = launched(device, parties, party_keys, manifest, identities)
    with pytest.raises(BinaryMeasurementError):
        cce.start_main(measurement)
    assert cce.state is TeeState.STOPPED and device.port.held


# --- the exception pin ------------------------------------------------------------------


SXP_REGION = ExceptionCause(ExceptionSource.SXP, code=3, address=0x1000_0040, tile=5)


def test_exception_while_running(device, parties, party_keys, manifest, identities, bundle):
    nonces = {MODEL: os.urandom(32), DATA: os.urandom(32)}
    cce = launched(device, parties, party_keys, manifest, identities, nonces)
    cce.start_main(LOADED_BINARY)
    cce.next_key_set()
    port = device.port
    contexts = installed_contexts(port)
    port.raise_exception(SXP_REGION)
    assert port.irq
    event = cce.on_exception(time=1234)         # the pin: the CCE reads the cause itself
    assert not port.irq and ("exception-ack", SXP_REGION) in port.log
    assert event == device.exception_log[0] == cce.exception_log[0]
    assert (event.sequence, event.cause, event.state, event.job_id, event.stopped,
            event.time) == (1, SXP_REGION, TeeState.RUNNING, manifest.job_id, True, 1234)
    # the tiles are held before the keys are zeroed
    hold = port.log.index(("hold",))
    after = [(ctx, k) for kind, ctx, k in (e for e in port.log[hold + 1:] if e[0] == "key")]
    assert after == [(ctx, bytes(32)) for ctx in sorted(contexts)]
    assert_stopped(device, party_keys, nonces, bundle, contexts)
    refused_everything(cce, manifest, identities)

    # later events are logged but change nothing more; terminate acknowledges the stop
    timeout = ExceptionCause(ExceptionSource.COMPLETION_TIMEOUT, tag=9)
    port.raise_exception(timeout)
    mark = len(port.log)
    second = cce.on_exception()
    assert (second.sequence, second.cause, second.state, second.stopped) == \
        (2, timeout, TeeState.STOPPED, False)
    assert [e for e in port.log[mark:] if e[0] != "exception-ack"] == []
    cce.terminate()
    assert cce.state is TeeState.TERMINATED and len(port.log) == mark + 1

    # the log survives the chip reset that leads on; the reset releases the tiles
    device.reset()
    assert not device.port.held and device.cce.state is TeeState.READY
    assert [e.sequence for e in device.exception_log] == [1, 2]
    third = device.cce.on_exception(ExceptionCause(ExceptionSource.BAD_COMPLETION, code=1))
    assert third.sequence == 3 and device.cce.exception_log[-1] is third


@pytest.mark.parametrize("stage", ["created", "booting"])
def test_exception_before_main(device, parties, party_keys, manifest, identities, bundle,
                               stage):
    nonces = {MODEL: os.urandom(32), DATA: os.urandom(32)}
    cce = device.cce
    if stage == "created":
        cce.create_tee(manifest, certificates(identities))
        ev = cce.get_attestation_report()
        for pid, p in parties.items():   # packages unwrapped, not yet launched
            cce.submit_key_package(p.wrap_keys(p.verify(ev), party_keys[pid], nonce=nonces[pid]))
    else:
        launched(device, parties, party_keys, manifest, identities, nonces)
    cause = ExceptionCause(ExceptionSource.BAD_COMPLETION, code=2, tag=4)
    event = cce.on_exception(cause)
    assert event.state is TeeState(stage) and event.stopped
    assert cce.state is TeeState.STOPPED and device.port.held
    ak = reference_identity(UDS, bundle.sbl.code, bundle.cce.code)["ak"]
    assert leftover_secrets(cce, all_secrets(party_keys, nonces), {"ak": ak},
                            skip=[device.port]) == []
    if stage == "booting":
        assert all(device.port.keys[c] == bytes(32) for c in installed_contexts(device.port))
    refused_everything(cce, manifest, identities)


def test_exception_without_a_tee_is_only_logged(device, manifest, identities):
    event = device.cce.on_exception(SXP_REGION)
    assert (event.state, event.job_id, event.stopped) == (TeeState.READY, None, False)
    assert not device.port.held and device.port.log == []
    device.cce.create_tee(manifest, certificates(identities))      # still usable
    assert device.cce.state is TeeState.CREATED


def test_spurious_pin_and_bad_cause(created):
    cce, port = created.cce, created.port
    mark = len(port.log)
    assert cce.on_exception() is None                 # nothing latched
    with pytest.raises(TypeError):
        cce.on_exception("sxp")
    with pytest.raises(ValueError):
        ExceptionCause(ExceptionSource.SXP, code=-1)
    assert cce.state is TeeState.CREATED and port.log[mark:] == [] and cce.exception_log == ()


# --- the trusted-mode bit, as read ---------------------------------------------------------


def test_refused_trusted_mode_creates_nothing(device, manifest, identities):
    """The SXP refuses trusted mode (CONFIG): create_tee raises TrustedModeError after the
    request, nothing is measured, signed or attested, and the TEE stays READY (no report,
    no key package, no launch); the CONFIG exception the SXP latched is only logged."""
    port = device.port
    port.refuse_trusted = True          # the SXP refuses trusted mode (CONFIG exception)
    cce = device.cce
    slots = device.measurements.values()
    with pytest.raises(TrustedModeError, match="refused trusted mode"):
        cce.create_tee(manifest, certificates(identities))
    assert port.log[-1] == ("trusted",) and not port.trusted   # requested, the bit is clear
    assert cce.state is TeeState.READY and device.measurements.values() == slots
    for call in (cce.get_attestation_report, cce.launch):
        with pytest.raises(ApiOrderError):
            call()
    event = cce.on_exception()
    assert event.cause == ExceptionCause(ExceptionSource.SXP, code=7) and not event.stopped
    assert port.keys == {}


def test_create_tee_refuses_an_sxp_already_trusted(device, manifest, identities):
    """The host put the SXP in trusted mode on its own configuration: the CCU cannot write
    the manifest's (a trusted SXP refuses configuration writes) and creates nothing."""
    port = device.port
    port.set_trusted_mode()
    mark = len(port.log)
    with pytest.raises(TrustedModeError, match="already in trusted mode"):
        device.cce.create_tee(manifest, certificates(identities))
    assert port.log[mark:] == [] and device.cce.state is TeeState.READY


def test_launch_rechecks_the_trusted_bit(device, parties, party_keys, manifest, identities):
    """launch() installs no key while the port reads the trusted-mode bit clear (a bit
    that fell after create_tee: only a fault does that; the check stays)."""
    port = device.port
    cce = device.cce
    cce.create_tee(manifest, certificates(identities))
    ev = cce.get_attestation_report()
    for pid, p in parties.items():
        cce.submit_key_package(p.wrap_keys(p.verify(ev), party_keys[pid]))
    port.trusted = False
    mark = len(port.log)
    with pytest.raises(TrustedModeError, match="trusted-mode bit reads clear"):
        cce.launch()
    assert cce.state is TeeState.CREATED and port.log[mark:] == [] and port.keys == {}


def test_trusted_bit_set_is_attested(created, parties):
    body = created.cce.get_attestation_report().report[:-96]
    trusted = hashlib.sha384(Z + hashlib.sha384(b"ITX-IPU-CONFIG\x00\x01").digest()).digest()
    assert body[82 + 48 * 3:82 + 48 * 4] == trusted and created.port.trusted_mode() is True
    for p in parties.values():
        p.verify(created.cce.get_attestation_report())
