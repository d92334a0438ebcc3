"""Code that several models, drivers and testbenches share: the payload codec
(:mod:`.payload`) and the exchange-packet header (:mod:`.packet`)."""
