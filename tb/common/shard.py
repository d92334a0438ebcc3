"""Split the regression into N shards: ``make sim SHARD=i/N`` runs shard *i* (1-based) of N.

A pytest plugin (``-p tb.common.shard --shard i/N``, which ``make sim`` passes when SHARD is
given): after collection it keeps the test items of shard *i* and deselects the others.
The split is a pure function of the collected test ids and the weights below, so every
machine of a CI matrix that collects the same tests (same commit, same BLOCK) computes the
same split, and every test lands in exactly one shard. It combines with JOBS (each
pytest-xdist worker collects and splits alike), BLOCK (the block's tests are split) and SEED.

Balance: the shards are filled greedily, heaviest test first, each test going to the
lightest shard so far (ties to the lowest shard number). A test's weight is its expected
wall time in seconds (:data:`WEIGHTS`), which is dominated by its Verilator build; a test
missing from the table weighs :data:`DEFAULT_WEIGHT`, as a mid-sized design would.
"""
import re

__all__ = ["parse_shard", "weight", "assign", "select", "WEIGHTS", "DEFAULT_WEIGHT"]

# Expected wall seconds of each pytest test of the regression on the 2-core machine. A
# cocotb test's cost is mostly the C++ compile of its Verilator model, which grows with the
# design: about 0.33 s per kGE (without clock gating, docs/area.md), measured on gcm_core
# (278 kGE, 92 s) and gcm_core_x4 (628 kGE, 210 s), plus the simulation itself where it is
# long (the ITX system scenarios). Only the ratios matter: they balance the shards. A test
# added to the regression should get a line here (without one it weighs DEFAULT_WEIGHT).
WEIGHTS = {
    "tb/aes/test_aes.py::test_aes256": 45,
    "tb/sha/test_sha.py::test_sha384": 200,
    "tb/rts/test_rts.py::test_rts": 60,
    # the soak slices run on the sxp_system, gcm_core and bcu builds the block tests make
    "tb/common/test_soak.py::test_soak_smoke[sxp_system]": 12,
    "tb/common/test_soak.py::test_soak_smoke[gcm]": 12,
    "tb/common/test_soak.py::test_soak_smoke[bcu]": 12,
    "tb/common/test_visibility.py::test_registers_memories_and_ports_only": 1,
    "tb/common/test_visibility.py::test_every_flip_flop_of_a_design_is_marked": 1,
    "tb/cc/test_cc_ctrl.py::test_cc_ctrl": 115,
    "tb/cc/test_cc_dma.py::test_cc_dma": 190,
    "tb/cc/test_gpu_cc.py::test_gpu_cc": 310,
    "tb/cc/test_gpu_cc_regs.py::test_gpu_cc_regs": 5,                # on test_gpu_cc's build
    "tb/gcm/test_gcm.py::test_gcm_core[gcm_core]": 92,
    "tb/gcm/test_gcm.py::test_gcm_core[gcm_core_x4]": 210,
    "tb/gpushield/test_gpushield.py::test_bcu": 60,
    "tb/gpushield/test_bcu_corners.py::test_bcu_corners": 5,          # on test_bcu's build
    "tb/gpushield/test_csr.py::test_map_validation": 1,
    "tb/gpushield/test_csr.py::test_docs_generated": 2,
    "tb/gpushield/test_csr.py::test_gpushield_doc_has_generated_table": 1,
    "tb/gpushield/test_csr.py::test_register_file_two_ports": 5,       # Amaranth simulator
    "tb/gpushield/test_csr.py::test_bridge_alone": 5,                  # Amaranth simulator
    "tb/gpushield/test_csr.py::test_bcu_csr": 20,                      # Amaranth simulator
    "tb/gpushield/test_lanes.py::test_lanes[3]": 20,                   # Amaranth simulator
    "tb/gpushield/test_lanes.py::test_lanes[64]": 40,                  # Amaranth simulator
    "tb/gpushield/test_engine.py::test_launch_during_fetches": 3,      # Amaranth simulator
    "tb/itx/test_itx.py::test_itx_device": 300,
    "tb/itx/test_itx.py::test_parameters_rejected": 1,
    "tb/itx/test_itx.py::test_icu_registers_documented": 1,
    "tb/pcie/test_pcie.py::test_pcie_rdtable[16]": 20,
    "tb/pcie/test_pcie.py::test_pcie_rdtable[256]": 55,
    "tb/pcie/test_pcie.py::test_pcie_rdtable[32_x4]": 30,
    "tb/pcie/test_pcie.py::test_parameters_rejected": 1,
    "tb/pcie/test_pcie.py::test_wider_beats_amaranth_sim[2]": 30,      # Amaranth simulator
    "tb/sxp/test_sxp.py::test_sxp[sxp]": 230,
    "tb/sxp/test_sxp.py::test_sxp[sxp_x4]": 475,
    "tb/sxp/test_sxp.py::test_sxp_contexts_4": 165,
    "tb/system/test_system.py::test_sxp_system[sxp_system]": 300,
    "tb/system/test_system.py::test_sxp_system[sxp_system_x4]": 550,
    "tb/system/test_system.py::test_parameters_rejected": 1,
    # the host-side error tests run on the builds test_sxp_system makes
    "tb/system/test_system_errors.py::test_sxp_system_errors[sxp_system]": 15,
    "tb/system/test_system_errors.py::test_sxp_system_errors[sxp_system_x4]": 25,
}
DEFAULT_WEIGHT = 100

_SHARD = re.compile(r"\s*(\d+)\s*/\s*(\d+)\s*")


def parse_shard(text):
    """``"i/N"`` → ``(i, N)`` with 1 ≤ i ≤ N; ValueError naming what is wrong otherwise."""
    m = _SHARD.fullmatch(str(text))
    if not m:
        raise ValueError(f"SHARD={text!r}: expected i/N, two whole numbers such as SHARD=1/4 "
                         f"(shard i of N, counted from 1)")
    index, count = int(m.group(1)), int(m.group(2))
    if count < 1:
        raise ValueError(f"SHARD={text!r}: the number of shards N must be at least 1")
    if not 1 <= index <= count:
        raise ValueError(f"SHARD={text!r}: shard i must be 1 … {count} (shards are counted from 1)")
    return index, count


def weight(nodeid):
    """The expected cost of the pytest test *nodeid* (a test id relative to the repository)."""
    return WEIGHTS.get(nodeid, DEFAULT_WEIGHT)


def assign(nodeids, count, cost=weight):
    """``{nodeid: shard}`` (shards 1 … *count*) for the test ids *nodeids*: heaviest first,
    each to the shard with the least weight so far, ties broken by test id and then by
    shard number, so the result does not depend on the order of *nodeids*."""
    if count < 1:
        raise ValueError(f"the number of shards must be at least 1, not {count}")
    loads = [0.0] * count
    shard_of = {}
    for nodeid in sorted(set(nodeids), key=lambda n: (-cost(n), n)):
        lightest = min(range(count), key=lambda s: (loads[s], s))
        loads[lightest] += cost(nodeid)
        shard_of[nodeid] = lightest + 1
    return shard_of


def select(nodeids, index, count, cost=weight):
    """The test ids of shard *index* of *count*, in their given order."""
    shard_of = assign(nodeids, count, cost)
    return [n for n in nodeids if shard_of[n] == index]


# ---- pytest plugin --------------------------------------------------------------------------

def pytest_addoption(parser):
    parser.addoption("--shard", default=None, metavar="i/N",
                     help="run only shard i of N (1-based) of the collected tests (tb/common/shard.py)")


def _option(config):
    text = config.getoption("--shard")
    if text is None:
        return None
    try:
        return parse_shard(text)
    except ValueError as e:
        import pytest

        raise pytest.UsageError(str(e)) from None


def pytest_configure(config):
    _option(config)     # a bad value stops the run before anything is collected or built


def pytest_report_header(config):
    shard = _option(config)
    if shard:
        return f"shard {shard[0]} of {shard[1]} (make sim SHARD={shard[0]}/{shard[1]}; tb/common/shard.py)"
    return None


def pytest_collection_modifyitems(config, items):
    shard = _option(config)
    if not shard:
        return
    index, count = shard
    nodeids = [item.nodeid for item in items]
    keep = set(select(nodeids, index, count))
    selected = [item for item in items if item.nodeid in keep]
    deselected = [item for item in items if item.nodeid not in keep]
    unweighed = sum(1 for n in nodeids if n not in WEIGHTS)
    if deselected:
        config.hook.pytest_deselected(items=deselected)
    items[:] = selected
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        total = sum(weight(n) for n in nodeids)
        mine = sum(weight(item.nodeid) for item in selected)
        note = (f"; {unweighed} without a weight in tb/common/shard.py, counted as {DEFAULT_WEIGHT}"
                if unweighed else "")
        reporter.write_line(f"shard {index}/{count}: {len(selected)} of {len(nodeids)} tests, "
                            f"expected {mine:.0f} of {total:.0f} s{note}")


def pytest_sessionfinish(session, exitstatus):
    # a shard may be empty (more shards than tests, as BLOCK=aes SHARD=2/2): that is a pass,
    # not pytest's "no tests collected" (exit 5), or a CI matrix would fail on it
    if _option(session.config) and exitstatus == 5:
        session.exitstatus = 0
