"""Golden models of ``cc_ctrl`` and ``cc_dma`` (:mod:`sw.cc.model`) and the host-side
bounce-buffer shim (:mod:`sw.cc.host`)."""
