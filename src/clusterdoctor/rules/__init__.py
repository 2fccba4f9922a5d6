"""The rule catalog: one module per layer; see :mod:`.registry` for how rules are declared and run."""
