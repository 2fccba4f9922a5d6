"""Storage: filesystem usage (``df``) and quota listings (``quota``, ``lfs quota``, ``mmlsquota``)."""
