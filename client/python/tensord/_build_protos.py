"""Generates the Python protobuf/gRPC modules of tensord from the .proto files.

The stubs are never committed: they are produced from ``<repo>/proto`` into
``tensord/_proto/`` the first time the package is imported (and again whenever a .proto file
changes), or by a package build (setup.py). Run ``python -m tensord._build_protos`` to force it.

protoc writes imports relative to the proto root (``from tensord.v1 import tensor_pb2``); those
are rewritten to point inside this package so the generated code never shadows or collides with
the ``tensord`` package itself or with other installed ``google.rpc`` / ``grpc.health`` modules.
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
OUT_DIR = PACKAGE_DIR / "_proto"
STAMP = "STAMP"
# Packages whose generated modules are moved under tensord._proto.
_REWRITTEN = ("tensord.v1", "google.rpc", "grpc.health.v1")
_IMPORT_RE = re.compile(r"^from (" + "|".join(re.escape(p) for p in _REWRITTEN) + r") import ",
                        re.MULTILINE)


def find_proto_dir() -> Path | None:
    """The directory holding tensord/v1/*.proto: $TENSORD_PROTO_DIR or the repository's proto/."""
    env = os.environ.get("TENSORD_PROTO_DIR")
    candidates = [Path(env)] if env else []
    candidates.append(PACKAGE_DIR.parents[2] / "proto")
    for c in candidates:
        if (c / "tensord" / "v1" / "service.proto").is_file():
            return c
    return None


def _proto_files(proto_dir: Path) -> list[str]:
    files = []
    for sub in ("tensord/v1", "google/rpc", "grpc/health/v1"):
        files += sorted(str(p.relative_to(proto_dir)) for p in (proto_dir / sub).glob("*.proto"))
    return files


def _digest(proto_dir: Path, files: list[str]) -> str:
    h = hashlib.sha256()
    for f in files:
        h.update(f.encode() + b"\0" + (proto_dir / f).read_bytes() + b"\0")
    return h.hexdigest()


def _is_current(out_dir: Path, digest: str) -> bool:
    stamp = out_dir / STAMP
    return stamp.is_file() and stamp.read_text().strip() == digest


def _find_plugin() -> str:
    plugin = shutil.which("grpc_python_plugin")
    if not plugin:
        raise RuntimeError(
            "tensord: grpc_python_plugin not found on PATH (Debian: protobuf-compiler-grpc); "
            "it is needed to generate the gRPC stubs")
    return plugin


def generate(proto_dir: Path, out_dir: Path) -> None:
    """Runs protoc into a fresh `out_dir` and rewrites the generated imports."""
    protoc = shutil.which("protoc")
    if not protoc:
        raise RuntimeError("tensord: protoc not found on PATH (Debian: protobuf-compiler); it is "
                           "needed to generate the protobuf modules")
    files = _proto_files(proto_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    cmd = [protoc, f"--python_out={out_dir}", f"--grpc_out={out_dir}",
           f"--plugin=protoc-gen-grpc={_find_plugin()}", f"-I{proto_dir}", *files]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"tensord: protoc failed ({' '.join(cmd)}):\n{proc.stderr}")
    for py in out_dir.rglob("*.py"):
        text = py.read_text()
        if py.name.endswith("_pb2_grpc.py") and "class " not in text:
            py.unlink()  # protoc emits an empty grpc module for protos without services
            continue
        py.write_text(_IMPORT_RE.sub(lambda m: f"from tensord._proto.{m.group(1)} import ", text))
    for d in [out_dir, *(p for p in out_dir.rglob("*") if p.is_dir())]:
        (d / "__init__.py").touch()
    (out_dir / STAMP).write_text(_digest(proto_dir, files) + "\n")


@contextlib.contextmanager
def _lock(path: Path):
    try:
        import fcntl
        f = open(path, "a+")
    except (ImportError, OSError):
        yield
        return
    with f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def ensure(force: bool = False) -> Path:
    """Makes tensord/_proto current with the .proto sources; returns its path.

    Without a proto directory (an installed wheel) the modules built into the package are used.
    """
    proto_dir = find_proto_dir()
    if proto_dir is None:
        if (OUT_DIR / "tensord" / "v1" / "service_pb2.py").is_file():
            return OUT_DIR
        raise RuntimeError("tensord: the generated protobuf modules are missing and no proto "
                           "directory was found; set TENSORD_PROTO_DIR to the repository's proto/")
    digest = _digest(proto_dir, _proto_files(proto_dir))
    if not force and _is_current(OUT_DIR, digest):
        return OUT_DIR
    if not os.access(PACKAGE_DIR, os.W_OK):
        if (OUT_DIR / "tensord" / "v1" / "service_pb2.py").is_file():
            return OUT_DIR  # read-only install: use what was built with it
        raise RuntimeError(f"tensord: cannot write the generated modules into {OUT_DIR}")
    with _lock(PACKAGE_DIR / ".proto.lock"):
        if not force and _is_current(OUT_DIR, digest):
            return OUT_DIR  # another process generated them while we waited
        tmp = Path(tempfile.mkdtemp(prefix="._proto.", dir=PACKAGE_DIR))
        try:
            generate(proto_dir, tmp)
            old = None
            if OUT_DIR.exists():
                old = PACKAGE_DIR / f"._proto.old.{os.getpid()}"
                OUT_DIR.rename(old)
            tmp.rename(OUT_DIR)
            if old is not None:
                shutil.rmtree(old, ignore_errors=True)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
    return OUT_DIR


if __name__ == "__main__":
    out = ensure(force="--force" in sys.argv)
    print(f"generated {out}")
