"""Golden model (:mod:`.model`) and CSR driver (:mod:`.driver`) of the Secure Exchange Pipe."""
