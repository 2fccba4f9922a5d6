"""Regenerate ``api_pb2.py`` and ``api_pb2_grpc.py`` from ``api.proto`` (needs grpcio-tools).

``python -m clusterdoctor.observe.node.podresources_v1._generate [OUT_ROOT]`` writes under OUT_ROOT
(default: the ``src`` folder holding this package) so that the generated imports are absolute
(``from clusterdoctor.observe.node.podresources_v1 import api_pb2``).
"""

from __future__ import annotations

import sys
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
SRC_ROOT = PACKAGE_DIR.parents[3]
PROTO_REL = "clusterdoctor/observe/node/podresources_v1/api.proto"


def generate(out_root: Path = SRC_ROOT) -> list[Path]:
    """Run protoc (grpc_tools) on the vendored proto; returns the files written."""
    from grpc_tools import protoc  # type: ignore[import-not-found]

    out_root.mkdir(parents=True, exist_ok=True)
    rc = protoc.main(
        [
            "grpc_tools.protoc",
            f"-I{SRC_ROOT}",
            f"--python_out={out_root}",
            f"--grpc_python_out={out_root}",
            str(SRC_ROOT / PROTO_REL),
        ]
    )
    if rc != 0:
        raise RuntimeError(f"protoc failed with exit code {rc}")
    base = out_root / Path(PROTO_REL).parent
    return [base / "api_pb2.py", base / "api_pb2_grpc.py"]


if __name__ == "__main__":
    for p in generate(Path(sys.argv[1]) if len(sys.argv) > 1 else SRC_ROOT):
        print(p)
