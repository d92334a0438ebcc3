"""cocotb regression and benchmark of pcie_rdtable."""
