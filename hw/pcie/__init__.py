"""PCIe-complex read lookup table (DESIGN.md § pcie_rdtable, docs/pcie.md)."""
from .layout import Cause, check_params
from .rdtable import PcieReadTable

__all__ = ["PcieReadTable", "Cause", "check_params"]
