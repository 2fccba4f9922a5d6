"""The fail-slow probe's outputs read back: its JSON-lines files (:mod:`.records`) and its
Prometheus series (:mod:`.prom`)."""
