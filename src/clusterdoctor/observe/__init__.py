"""Data in: one module per real source; parse_*() are pure and raise only InputError, collect_*() read the live system."""
