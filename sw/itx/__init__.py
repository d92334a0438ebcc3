"""ITX end to end (issue 6): frames and nonces, host memory, the host driver shim and the
tile model. docs/itx.md is the reference."""
from .frames import *  # noqa: F401,F403
from .host import *  # noqa: F401,F403
from .runtime import *  # noqa: F401,F403
from .tile import *  # noqa: F401,F403
