"""The shim with the real CCU model (sw/ccu) on the SXP golden model: the runtime's
measurement, key schedule and SXP configuration go into the job manifest; the CCU enters
trusted mode, unwraps both parties' key packages, configures the SXP and installs key sets
through :class:`sw.itx.csr.CsrKeyPort` on the SXP's ``ccu`` CSR port; the tiles boot, the
measurement matches the manifest's, and the next key set at the synchronisation point lets
them read the data provider's stream."""
from sw.ccu.ca import ManufacturerCA
from sw.ccu.certs import fingerprint
from sw.ccu.device import Device
from sw.ccu.manifest import KEY_CHECKPOINT, JobManifest, PartyEntry
from sw.ccu.testing import firmware, make_identities, make_parties
from sw.itx.csr import CsrConfigWriter, CsrKeyPort
from sw.itx.frames import payload_bytes
from sw.itx.runtime import DATA_BASE
from sw.itx.testing import GoldenDevice, Scenario
from sw.itx.tile import check_measurement

MODEL, DATA = 1, 2


def test_shim_with_the_ccu_model_on_the_golden_sxp():
    sc = Scenario(seed=21)
    dev = GoldenDevice(sc.tiles, host=sc.rt.host)
    sc.prepare(dev.tiles)
    code_id, data_id = sc.rt.key_id(sc.model_key), sc.rt.key_id(sc.data_key)

    ca = ManufacturerCA()
    bundle = firmware(ca)
    ccu = Device(bundle, ca.firmware_public_key, CsrKeyPort(dev.ccu_csr),
                 trng=lambda n: bytes(range(n)))
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

    dev.run(sc.rt.boot())
    check_measurement(dev.tiles.values(), job.binary_measurement)
    ccu.cce.next_key_set()               # synchronisation point 1: the data key
    dev.run(sc.rt.step(sc.data))
    for t, sl in sc.data.readers.items():
        size = payload_bytes(sl.frame_bytes)
        lo, hi = sl.first * size, min(len(sc.batch), (sl.first + sl.count) * size)
        assert dev.tiles[t].memory[DATA_BASE:DATA_BASE + hi - lo] == sc.batch[lo:hi]
    dev.run(sc.rt.checkpoint(sc.plan))   # under the CCU-derived checkpoint key
    assert not dev.model.exc and dev.model.denied == 0
