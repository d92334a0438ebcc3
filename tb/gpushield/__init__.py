"""cocotb testbench and benchmark of the GPUShield BCU."""
