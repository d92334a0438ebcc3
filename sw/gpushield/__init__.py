"""GPUShield software: golden model of the BCU, driver shim and warp trace generators."""
