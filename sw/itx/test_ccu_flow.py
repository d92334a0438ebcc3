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
from sw.ccu.cce import TeeState
from sw.ccu.errors import ApiOrderError
from sw.ccu.sxp_port import ExceptionSource
from sw.itx.csr import CsrConfigWriter, CsrKeyPort
from sw.itx.frames import payload_bytes
from sw.itx.runtime import DATA_BASE
from sw.itx.testing import CcuJob, GoldenDevice, Scenario
from sw.itx.tile import Cause, SecurityException, application_measurement


def launched(seed, tamper=None):
    """A job created, attested, keyed and launched on the golden device; *tamper(sc)* may
    change host memory before anything runs. Returns (scenario, device, ccu, job)."""
    sc = Scenario(seed=seed)
    if tamper is not None:
        tamper(sc)
    dev = GoldenDevice(sc.tiles, host=sc.rt.host)
    sc.prepare(dev.tiles)
    ccu = CcuJob(sc, CsrKeyPort(dev.ccu_csr, read32=dev.ccu_read32, hold=dev.hold_tiles))
    # the host programs the SXP first: trusted mode (entered by create_tee) requires a
    # consistent configuration (KPHYSMAP 1:1, disjoint regions) or raises CONFIG
    sc.rt.configure(CsrConfigWriter(dev.host_csr))
    ccu.launch()                         # manifest config over the ccu port, key set 0
    assert dev.model.trusted and not dev.model.exc
    return sc, dev, ccu, ccu.job


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
