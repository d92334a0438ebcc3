"""The designs that convert to Verilog modules, by contract name (the block contracts
are summarised in docs/; ``<name>_x<L>`` is the design at ``lanes`` = L, docs/line-rate.md).

Each entry names the block's folder (``hw/<folder>``, ``sw/<folder>``, ``tb/<folder>``), the
component class and the constructor parameters that differ from its defaults. The Verilog
module of a design carries the design's name (``gcm_core_x4.v`` holds ``module gcm_core_x4``).
"""
import importlib
from dataclasses import dataclass

__all__ = ["Design", "DESIGNS", "available", "elaborate", "by_folder"]


@dataclass(frozen=True)
class Design:
    folder: str        # hw/<folder>, sw/<folder>, tb/<folder>
    component: str     # "module:Class"
    params: tuple = () # default constructor keyword arguments, as (name, value) pairs

    def load(self):
        module, cls = self.component.split(":")
        return getattr(importlib.import_module(module), cls)


DESIGNS = {
    "aes256": Design("aes", "hw.aes:AES256"),
    "gcm_core": Design("gcm", "hw.gcm:GcmCore"),
    "gcm_core_x2": Design("gcm", "hw.gcm:GcmCore", (("lanes", 2),)),
    "gcm_core_x4": Design("gcm", "hw.gcm:GcmCore", (("lanes", 4),)),
    "pcie_rdtable": Design("pcie", "hw.pcie:PcieReadTable"),
    "bcu": Design("gpushield", "hw.gpushield:BCU"),
    "bcu_csr": Design("gpushield", "hw.gpushield:BCUCSR"),
    "sxp": Design("sxp", "hw.sxp:SXP"),
    "sxp_x4": Design("sxp", "hw.sxp:SXP", (("lanes", 4),)),
    "sxp_system": Design("system", "hw.top:SxpSystem"),
    "sxp_system_x4": Design("system", "hw.top:SxpSystem", (("lanes", 4),)),
    "itx_device": Design("itx", "hw.itx:ItxDevice"),
    "cc_ctrl": Design("cc", "hw.cc:CCCtrl"),
    "cc_dma": Design("cc", "hw.cc:CCDma"),
    "gpu_cc": Design("cc", "hw.cc:GpuCC"),
    "sha384": Design("sha", "hw.sha:SHA384"),
    "rts": Design("rts", "hw.rts:MeasurementStore"),
}


def available():
    """Names of every design, after importing each component class: a block that fails to
    import raises here (it must not silently disappear from ``make verilog``/``make synth``)."""
    for design in DESIGNS.values():
        design.load()
    return list(DESIGNS)


def elaborate(name, **params):
    """A fresh instance of design *name* built with *params* over its defaults."""
    if name not in DESIGNS:
        raise ValueError(f"unknown design {name!r}; known: {', '.join(DESIGNS)}")
    design = DESIGNS[name]
    return design.load()(**{**dict(design.params), **params})


def by_folder(block):
    """Design names selected by *block*: a contract name or a block folder name."""
    if block in DESIGNS:
        return [block]
    names = [n for n, d in DESIGNS.items() if d.folder == block]
    if not names:
        raise ValueError(f"no design or block folder named {block!r}")
    return names
