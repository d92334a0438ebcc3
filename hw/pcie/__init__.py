"""PCIe-complex read lookup table (docs/pcie.md)."""
from .layout import Cause, check_params
from .rdtable import PcieReadTable

__all__ = ["PcieReadTable", "Cause", "check_params"]
