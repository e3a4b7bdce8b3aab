"""Generate the Python stubs for Headroom's protos (never hand-edit the output).

Run from anywhere: ``python protos/generate.py`` writes ``*_pb2.py``, ``*_pb2.pyi`` and
``*_pb2_grpc.py`` (+ typed ``*_pb2_grpc.pyi``) beside each ``.proto``. ``--check`` generates into a
temporary folder and exits 1 when the checked-in stubs differ (CI uses it).
"""

from __future__ import annotations

import argparse
import filecmp
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
PROTO_FILES = (
    "protos/headroom/v1/placement.proto",
    "protos/headroom/v1/hints.proto",
    "protos/externalscaler/externalscaler.proto",
)


def generate(out_root: Path) -> list[Path]:
    """Run protoc for every proto with the repository root as include path; return written files."""
    import grpc_tools

    well_known = Path(grpc_tools.__file__).parent / "_proto"
    protos = [p for p in PROTO_FILES if (REPO_ROOT / p).exists()]
    command = [
        sys.executable, "-m", "grpc_tools.protoc",
        f"-I{REPO_ROOT}", f"-I{well_known}",
        f"--python_out={out_root}", f"--grpc_python_out={out_root}",
        f"--mypy_out={out_root}", f"--mypy_grpc_out={out_root}",
        *protos,
    ]
    subprocess.run(command, check=True, cwd=REPO_ROOT)
    return sorted(out_root.glob("protos/**/*_pb2*.py*"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="fail if checked-in stubs are stale")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        written = generate(Path(tmp))
        stale = []
        for path in written:
            relative = path.relative_to(tmp)
            target = REPO_ROOT / relative
            if args.check:
                if not target.exists() or not filecmp.cmp(path, target, shallow=False):
                    stale.append(str(relative))
            else:
                shutil.copyfile(path, target)
        if stale:
            print("stale generated stubs (run python protos/generate.py):", *stale, sep="\n  ")
            return 1
    print("generated stubs are up to date" if args.check else f"wrote {len(written)} files")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
