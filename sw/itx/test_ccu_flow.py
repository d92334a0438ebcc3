"""The shim with the real CCU model (sw/ccu) on the SXP golden model: the runtime's
measurement, key schedule and SXP configuration go into the job manifest; the CCU enters
trusted mode (and reads the bit back for its report), unwraps both parties' key packages,
configures the SXP and installs key sets through :class:`sw.itx.csr.CsrKeyPort` on the
SXP's ``ccu`` CSR port; the tiles boot, the CCU lets main execution start only once the
bootloader's measurement equals the manifest's, and the next key set at the
synchronisation point lets them read the data provider's stream. An SXP exception reaches
the CCU's handler, which reads the cause over the port, holds the tiles and zeroes the
keys."""
import pytest

from hw.sxp.regs import Cause as SxpCause
from sw.ccu.ca import ManufacturerCA
from sw.ccu.cce import TeeState
from sw.ccu.certs import fingerprint
from sw.ccu.device import Device
from sw.ccu.errors import ApiOrderError
from sw.ccu.manifest import KEY_CHECKPOINT, JobManifest, PartyEntry
from sw.ccu.sxp_port import ExceptionSource
from sw.ccu.testing import firmware, make_identities, make_parties
from sw.itx.csr import CsrConfigWriter, CsrKeyPort
from sw.itx.frames import payload_bytes
from sw.itx.runtime import DATA_BASE
from sw.itx.testing import GoldenDevice, Scenario
from sw.itx.tile import Cause, SecurityException, application_measurement

MODEL, DATA = 1, 2


def launched(seed, tamper=None):
    """A job created, attested, keyed and launched on the golden device; *tamper(sc)* may
    change host memory before anything runs. Returns (scenario, device, ccu, job)."""
    sc = Scenario(seed=seed)
    if tamper is not None:
        tamper(sc)
    dev = GoldenDevice(sc.tiles, host=sc.rt.host)
    sc.prepare(dev.tiles)
    code_id, data_id = sc.rt.key_id(sc.model_key), sc.rt.key_id(sc.data_key)

    ca = ManufacturerCA()
    bundle = firmware(ca)
    port = CsrKeyPort(dev.ccu_csr, read32=dev.ccu_read32, hold=dev.hold_tiles)
    ccu = Device(bundle, ca.firmware_public_key, port, trng=lambda n: bytes(range(n)))
    ca.provision(ccu)
    ids = make_identities(MODEL, DATA)
    job = JobManifest(
        job_id=b"itx-issue-6-job!", binary_measurement=sc.rt.measurement(),
        parties=(PartyEntry(MODEL, fingerprint(ids[MODEL][1]), (code_id,)),
                 PartyEntry(DATA, fingerprint(ids[DATA][1]), (data_id,))),
        key_sets=sc.rt.key_sets({0: {1: KEY_CHECKPOINT}}),
        sxp_config=sc.rt.sxp_config())
    parties = make_parties(ca, ca.reference_certificate(bundle), ids, job)

    # the host programs the SXP first: trusted mode (entered by create_tee) requires a
    # consistent configuration (KPHYSMAP 1:1, disjoint regions) or raises CONFIG
    sc.rt.configure(CsrConfigWriter(dev.host_csr))
    ccu.cce.create_tee(job, [cert for _, cert in ids.values()])
    assert dev.model.trusted and not dev.model.exc
    evidence = ccu.cce.get_attestation_report()
    for pid, key in ((MODEL, {code_id: sc.model_key}), (DATA, {data_id: sc.data_key})):
        ccu.cce.submit_key_package(parties[pid].wrap_keys(parties[pid].verify(evidence), key))
    ccu.cce.launch()                     # manifest config over the ccu port, key set 0
    return sc, dev, ccu, job


def measured(dev):
    return application_measurement({t.id: t.digest for t in dev.tiles.values()})


def test_shim_with_the_ccu_model_on_the_golden_sxp():
    sc, dev, ccu, job = launched(21)
    dev.run(sc.rt.boot())
    ccu.cce.start_main(measured(dev))    # the bootloader's measurement, checked by the CCU
    assert ccu.cce.state is TeeState.RUNNING
    ccu.cce.next_key_set()               # synchronisation point 1: the data key
    dev.run(sc.rt.step(sc.data))
    for t, sl in sc.data.readers.items():
        size = payload_bytes(sl.frame_bytes)
        lo, hi = sl.first * size, min(len(sc.batch), (sl.first + sl.count) * size)
        assert dev.tiles[t].memory[DATA_BASE:DATA_BASE + hi - lo] == sc.batch[lo:hi]
    dev.run(sc.rt.checkpoint(sc.plan))   # under the CCU-derived checkpoint key
    assert not dev.model.exc and dev.model.denied == 0
    assert ccu.cce.exception_log == ()


def test_sxp_exception_reaches_the_ccu_handler():
    """A flipped ciphertext bit in a code frame: the SXP latches AUTH (the pin); the CCU
    reads the cause over its port (tile and address of the frame), acknowledges it, holds
    the tiles, zeroes the contexts it loaded and refuses to go on."""
    frame = {}

    def flip(sc):
        victim = sc.tiles[2]
        frame["addr"] = sc.frame_addr(victim, 1)
        frame["tile"] = victim
        sc.flip(frame["addr"], 40, 3)

    sc, dev, ccu, job = launched(22, flip)
    with pytest.raises(SecurityException) as e:
        dev.run(sc.rt.boot())
    assert e.value.cause == Cause.SXP_AUTH
    assert dev.model.exc, "the SXP did not latch the exception (no pin for the CCU)"
    event = ccu.cce.on_exception(time=dev.now)
    assert event is not None and event.stopped and event.state is TeeState.BOOTING
    assert event.cause.source is ExceptionSource.SXP
    assert event.cause.code == SxpCause.AUTH.value
    assert event.cause.tile == frame["tile"]
    assert frame["addr"] <= event.cause.address < frame["addr"] + sc.code[frame["tile"]].frame_bytes
    assert not dev.model.exc, "the handler did not acknowledge STATUS.exc"
    assert ccu.cce.state is TeeState.STOPPED and dev.held
    for ctx in {k.phys_ctx for k in job.key_sets[0]}:         # what launch() installed
        for engine in (dev.model.gcm_r, dev.model.gcm_w):
            assert engine._ctx[ctx].key == 0, f"context {ctx} still holds a key after the " \
                                              "CCU's handler"
    with pytest.raises(ApiOrderError):
        ccu.cce.start_main(job.binary_measurement)      # even the right one: stopped
    with pytest.raises(SecurityException) as e:
        dev.run(sc.rt.boot())
    assert e.value.cause == Cause.HELD
    assert ccu.cce.on_exception() is None, "a second pin without a latched cause is spurious"
