"""Capture a real /proc/self/numa_maps with one VMA per memory policy (Linux x86_64, kernel >= 6.9).

Run: python3 tests/data/procfs/capture_policies.py > tests/data/procfs/numa_maps_policies.txt
Each region is mmap'ed, given its policy with mbind(2), then touched page by page, so the kernel
itself writes the policy strings ("prefer (many)", "weighted interleave", "bind=static") and the
N0= page counts. Region sizes (MiB) are printed to stderr and listed in README.md.
"""

import ctypes
import mmap
import sys

SYS_MBIND = 237  # x86_64
MPOL = {"prefer": 1, "bind": 2, "interleave": 3, "local": 4, "prefer_many": 5, "weighted_interleave": 6}
STATIC, RELATIVE = 1 << 15, 1 << 14
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
mask = ctypes.c_ulong(1)  # node 0
regions = [  # (label, mode, MiB)
    ("bind", MPOL["bind"], 8),
    ("bind=static", MPOL["bind"] | STATIC, 3),
    ("interleave", MPOL["interleave"], 5),
    ("prefer", MPOL["prefer"], 2),
    ("prefer=relative", MPOL["prefer"] | RELATIVE, 1),
    ("prefer (many)", MPOL["prefer_many"], 6),
    ("weighted interleave", MPOL["weighted_interleave"], 7),
    ("local", MPOL["local"], 4),
]
keep = []
for label, mode, mib in regions:
    size = mib << 20
    m = mmap.mmap(-1, size)
    addr = ctypes.addressof(ctypes.c_char.from_buffer(m))
    nodes = None if mode == MPOL["local"] else ctypes.byref(mask)
    r = libc.syscall(SYS_MBIND, ctypes.c_void_p(addr), ctypes.c_size_t(size), mode, nodes, 64, 0)
    if r != 0:
        sys.exit(f"mbind {label}: errno {ctypes.get_errno()}")
    for off in range(0, size, 4096):
        m[off] = 1
    keep.append(m)
    print(f"{label}: {mib} MiB at {addr:x}", file=sys.stderr)
sys.stdout.write(open("/proc/self/numa_maps").read())
