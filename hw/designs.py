"""The designs that convert to Verilog modules, by contract name (DESIGN.md § Blocks).

Each entry names the block's folder (``hw/<folder>``, ``sw/<folder>``, ``tb/<folder>``) and
the component class. Designs whose package does not exist yet are skipped by
:func:`available`, so ``make verilog`` writes every contract that exists.
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
    "pcie_rdtable": Design("pcie", "hw.pcie:PcieReadTable"),
    "bcu": Design("gpushield", "hw.gpushield:BCU"),
    "bcu_csr": Design("gpushield", "hw.gpushield:BCUCSR"),
    "sxp": Design("sxp", "hw.sxp:SXP"),
    "sxp_system": Design("system", "hw.top:SxpSystem"),
    "cc_ctrl": Design("cc", "hw.cc:CCCtrl"),
    "cc_dma": Design("cc", "hw.cc:CCDma"),
}


def available():
    """Names of the designs whose RTL exists (the component class imports)."""
    names = []
    for name, design in DESIGNS.items():
        try:
            design.load()
        except (ImportError, AttributeError):
            continue
        names.append(name)
    return names


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
