"""clusterdoctor: find out why a GPU training cluster got slow, prove it, and fix it.

The package imports nothing heavy at import time; optional parts (torch, NVML, numpy) are imported
where they are used.
"""

__version__ = "0.1.0"
