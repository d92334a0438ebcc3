"""The two AES S-box models (hw/aes/sbox.py): the circuit that is synthesised and the table
the regression simulates the larger designs with must be one function, and each build must
get the model it asks for."""
import pytest
from amaranth.hdl import Module, Signal
from amaranth.sim import Simulator

from hw.aes.sbox import TABLE, sbox, sbox_layer, sbox_model, sbox_table
from sw.aes import SBOX


def test_table_is_the_fips_sbox():
    assert TABLE == tuple(SBOX)
    # FIPS-197 figure 7, written out rather than taken from any model
    assert (TABLE[0x00], TABLE[0x01], TABLE[0x53], TABLE[0xff]) == (0x63, 0x7c, 0xed, 0x16)


def test_both_models_are_the_fips_sbox_on_every_byte():
    """Both models built side by side over all 256 byte values at once, simulated, against
    the software model's S-box (sw/aes, itself checked against OpenSSL and the CAVP files)."""
    m = Module()
    x = Signal(8 * 256)
    circuit, table = sbox(m, x, name="c"), sbox_table(m, x, name="t")
    out_c, out_t = Signal(len(x)), Signal(len(x))
    m.d.comb += [out_c.eq(circuit), out_t.eq(table)]
    every = sum(b << (8 * b) for b in range(256))
    seen = {}

    async def bench(ctx):
        ctx.set(x, every)
        seen["c"], seen["t"] = ctx.get(out_c), ctx.get(out_t)

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
    expect = sum(SBOX[b] << (8 * b) for b in range(256))     # sw/aes, not the RTL's TABLE
    assert seen["c"] == expect, "the circuit differs from the FIPS-197 S-box"
    assert seen["t"] == expect, "the table model differs from the FIPS-197 S-box"


def _layer_rtlil(model=None):
    from amaranth.back import rtlil

    m = Module()
    x, y = Signal(16), Signal(16)
    if model is None:
        m.d.comb += y.eq(sbox_layer(m, x, name="layer"))
    else:
        with sbox_model(model):
            m.d.comb += y.eq(sbox_layer(m, x, name="layer"))
    return rtlil.convert(m, ports=[x, y])


def test_layer_follows_the_model():
    assert "layer_rom" in _layer_rtlil("table") and "layer_T1" not in _layer_rtlil("table")
    assert "layer_T1" in _layer_rtlil("circuit") and "layer_rom" not in _layer_rtlil("circuit")
    assert "layer_rom" not in _layer_rtlil()          # the circuit unless asked
    with pytest.raises(ValueError, match="S-box model"):
        with sbox_model("lut"):
            pass


def test_generate_writes_each_model_apart(tmp_path):
    from scripts.verilog import generate

    circuit = generate("aes256", out_dir=tmp_path)
    table = generate("aes256", out_dir=tmp_path, sbox="table")
    assert (circuit.name, table.name) == ("aes256.v", "aes256-sbox_table.v")
    c, t = circuit.read_text(), table.read_text()
    assert "s1_sbox_T1" in c and "s1_sbox_rom" not in c
    assert "s1_sbox_rom" in t and "s1_sbox_T1" not in t
    assert "module aes256(" in t
    with pytest.raises(ValueError, match="S-box model must be"):
        generate("aes256", out_dir=tmp_path, sbox="lut")


def test_regression_model_per_design(monkeypatch):
    from tb.common.sim import regression_sbox as model_of

    monkeypatch.delenv("SIM_SBOX", raising=False)
    monkeypatch.delenv("SIM_COVERAGE", raising=False)
    assert (model_of("aes256"), model_of("gcm_core"), model_of("sxp_x4")) == ("circuit", "table", "table")
    monkeypatch.setenv("SIM_SBOX", "circuit")
    assert model_of("sxp_x4") == "circuit"
    monkeypatch.setenv("SIM_SBOX", "table")
    monkeypatch.setenv("SIM_COVERAGE", "1")
    assert model_of("sxp_x4") == "circuit"     # coverage figures are of the circuit
    monkeypatch.setenv("SIM_SBOX", "lut")
    with pytest.raises(ValueError, match="SIM_SBOX: the S-box model must be"):
        model_of("gcm_core")
