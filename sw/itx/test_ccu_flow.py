"""The shim with the real CCU model (sw/ccu) on the SXP golden model: the runtime's
measurement, key schedule and SXP configuration go into the job manifest; the CCU writes
the configuration, enters trusted mode (and reads the bit and the configuration back for
its report), unwraps both parties' key packages and installs key sets through
:class:`sw.itx.csr.CsrKeyPort` on the SXP's ``ccu`` CSR port; the tiles boot, the CCU
lets main execution start only once the bootloader's measurement equals the manifest's,
and the next key set at the
synchronisation point lets them read the data provider's stream. An SXP exception reaches
the CCU's handler, which reads the cause over the port, holds the tiles and zeroes the
keys."""
import dataclasses

import pytest

from hw.sxp.regs import ADDR_KEY, ADDR_KEY_COMMIT, KEY_WORDS
from hw.sxp.regs import Cause as SxpCause
from sw.ccu.cce import TeeState
from sw.ccu.errors import ApiOrderError, ManifestError, ManifestMismatchError, TrustedModeError
from sw.ccu.manifest import ConfigWrite
from sw.ccu.sxp_port import ExceptionSource, SxpRegister
from sw.itx.csr import CsrConfigWriter, CsrKeyPort
from sw.itx.frames import payload_bytes
from sw.itx.runtime import DATA_BASE
from sw.itx.testing import CcuJob, GoldenDevice, Scenario
from sw.itx.tile import Cause, SecurityException, application_measurement


class CountingBus:
    """A ``write32`` that counts the writes it passes on."""

    def __init__(self, write32):
        self.write32, self.writes = write32, []

    def __call__(self, addr, value):
        self.writes.append((addr, value))
        self.write32(addr, value)


def device_and_ccu(sc):
    dev = GoldenDevice(sc.tiles, host=sc.rt.host)
    sc.prepare(dev.tiles)
    bus = CountingBus(dev.ccu_csr)
    ccu = CcuJob(sc, CsrKeyPort(bus, read32=dev.ccu_read32, hold=dev.hold_tiles))
    return dev, ccu, bus


def launched(seed, tamper=None, host_first=False):
    """A job created, attested, keyed and launched on the golden device; *tamper(sc)* may
    change host memory before anything runs; *host_first*: the host programmed the SXP
    with its own configuration before (the CCU's overwrites it). Returns (scenario,
    device, ccu, job)."""
    sc = Scenario(seed=seed)
    if tamper is not None:
        tamper(sc)
    dev, ccu, _ = device_and_ccu(sc)
    if host_first:
        sc.rt.configure(CsrConfigWriter(dev.host_csr))
    ccu.launch()                         # config and trust in create_tee; key set 0 here
    assert dev.model.trusted and not dev.model.exc
    return sc, dev, ccu, ccu.job


def measured(dev):
    return application_measurement({t.id: t.digest for t in dev.tiles.values()})


@pytest.mark.parametrize("host_first", [False, True])
def test_shim_with_the_ccu_model_on_the_golden_sxp(host_first):
    sc, dev, ccu, job = launched(21, host_first=host_first)
    for (register, index), value in job.configuration().items():    # the manifest's, live
        if register is not SxpRegister.KPHYSMAP or index < dev.model.contexts:
            assert ccu.device.port.read_config(register, index) == value
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


def with_config(job, *writes):
    """*job* with *writes* replacing the same entries of its configuration."""
    named = {(w[0], w[1]) for w in writes}
    return dataclasses.replace(job, sxp_config=tuple(
        c for c in job.sxp_config if (c.register, c.index) not in named) + tuple(
        ConfigWrite(*w) for w in writes))


@pytest.mark.parametrize("writes, match", [
    (((SxpRegister.KPHYSMAP, 1, 1),), "both map to region 1"),
    (((SxpRegister.KSELLIMIT_BASE, 0, 0), (SxpRegister.KSELLIMIT_LIMIT, 0, 1 << 31)),
     "overlaps"),
    (((SxpRegister.KSELLIMIT_BASE, 1, (1 << 32) + 0x1000_0000),), "32 bits"),
], ids=["two contexts, one region", "cleartext over key regions", "64-bit base"])
def test_bad_manifest_configuration_writes_nothing(writes, match):
    """The runtime's manifest with one flaw: create_tee refuses it with ManifestError before
    a single CSR write on the ccu port; the SXP stays untrusted with its reset
    configuration."""
    sc = Scenario(seed=23)
    dev, ccu, bus = device_and_ccu(sc)
    bad = with_config(ccu.job, *writes)
    with pytest.raises(ManifestError, match=match):
        ccu.cce.create_tee(bad, [cert for _, cert in ccu.ids.values()])
    assert bus.writes == [] and not dev.model.trusted and not dev.model.exc
    assert ccu.cce.state is TeeState.READY


def test_host_change_in_the_window_is_rejected_by_the_parties():
    """The host adds a cleartext window onto the first key region between the CCU's last
    configuration write and its trust request, shifted so that it stays disjoint: the
    SXP enters trusted mode, but the report's manifest hash covers the configuration read
    back, so both parties refuse it."""
    sc = Scenario(seed=24)
    dev, ccu, bus = device_and_ccu(sc)
    ccu_port = ccu.device.port
    request = ccu_port.set_trusted_mode
    base = max(c.value for c in ccu.job.sxp_config
               if c.register is SxpRegister.KSELLIMIT_LIMIT)

    def racing_host():
        host = CsrConfigWriter(dev.host_csr)
        host(SxpRegister.KSELLIMIT_BASE, 0, base)
        host(SxpRegister.KSELLIMIT_LIMIT, 0, base + 0x1000)
        request()
    ccu_port.set_trusted_mode = racing_host
    ccu.cce.create_tee(ccu.job, [cert for _, cert in ccu.ids.values()])
    assert dev.model.trusted
    evidence = ccu.cce.get_attestation_report()
    for party in ccu.parties.values():
        with pytest.raises(ManifestMismatchError, match="manifest hash"):
            party.verify(evidence)


def test_sxp_refusing_trust_stops_the_ccu():
    """The host maps context 1 onto context 0's region in the window before CTRL.trust:
    the golden SXP refuses trusted mode (CONFIG); create_tee raises TrustedModeError,
    signs nothing and stays READY; no key reaches the SXP; the CONFIG event is logged."""
    sc = Scenario(seed=25)
    dev, ccu, bus = device_and_ccu(sc)
    ccu_port = ccu.device.port
    request = ccu_port.set_trusted_mode

    def racing_host():
        CsrConfigWriter(dev.host_csr)(SxpRegister.KPHYSMAP, 1, 1)
        request()
    ccu_port.set_trusted_mode = racing_host
    with pytest.raises(TrustedModeError, match="refused trusted mode"):
        ccu.cce.create_tee(ccu.job, [cert for _, cert in ccu.ids.values()])
    assert not dev.model.trusted and dev.model.record.cause is SxpCause.CONFIG
    assert ccu.cce.state is TeeState.READY
    with pytest.raises(ApiOrderError):
        ccu.cce.get_attestation_report()
    keys = {ADDR_KEY + 4 * k for k in range(KEY_WORDS)} | {ADDR_KEY_COMMIT}
    assert bus.writes and not keys & {addr for addr, _ in bus.writes}, "a key word was written"
    event = ccu.cce.on_exception()
    assert event.cause.code == SxpCause.CONFIG.value and not event.stopped


def test_csr_key_port_reads_the_configuration_back():
    """CsrKeyPort is the whole CcuPort: read_config returns what the host port wrote, over
    the ccu port's reads; a KPHYSMAP entry beyond the SXP's contexts reads None without a
    bus read (no such register); without a read32 it cannot read (TypeError)."""
    from sw.ccu.sxp_port import PORT_METHODS, CcuPort
    from sw.sxp.driver import ModelBus
    from sw.sxp.model import SxpModel
    model = SxpModel(4)
    reads = []

    def read32(addr):
        reads.append(addr)
        return model.csr_read(addr, "ccu")
    port = CsrKeyPort(ModelBus(model, "ccu"), contexts=4, read32=read32)
    assert isinstance(port, CcuPort) and all(callable(getattr(port, m)) for m in PORT_METHODS)
    host = CsrConfigWriter(ModelBus(model, "host"), contexts=4)
    written = {(SxpRegister.KXBCTXMAP, 5): 3, (SxpRegister.KPHYSMAP, 2): 7,
               (SxpRegister.KSELLIMIT_BASE, 7): 0x1000_0000, (SxpRegister.KSELLIMIT_LIMIT, 7): 0x1000_4000}
    for (register, index), value in written.items():
        host(register, index, value)
    for (register, index), value in written.items():
        assert port.read_config(register, index) == value
        assert port.read_config(int(register), index) == value          # a plain register number
    assert port.read_config(SxpRegister.KPHYSMAP, 3) == 4              # reset: context p -> region p + 1
    n = len(reads)
    assert [port.read_config(SxpRegister.KPHYSMAP, i) for i in range(4, 16)] == [None] * 12
    assert len(reads) == n, "an absent register was read on the bus"
    with pytest.raises(TypeError, match="without read32"):
        CsrKeyPort(ModelBus(model, "ccu"), contexts=4).read_config(SxpRegister.KXBCTXMAP, 0)
