"""Builds the protobuf/gRPC modules into the package (tensord/_proto) at build time, so an
installed wheel does not need protoc or the repository's proto/ directory. Needs protoc and
grpc_python_plugin on PATH (Debian: protobuf-compiler, protobuf-compiler-grpc)."""
import importlib.util
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent


class BuildPyWithProtos(build_py):
    def run(self):
        spec = importlib.util.spec_from_file_location(
            "_build_protos", HERE / "tensord" / "_build_protos.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        proto_dir = mod.find_proto_dir()
        if proto_dir is None:
            raise SystemExit("tensord: set TENSORD_PROTO_DIR to the repository's proto/")
        super().run()
        mod.generate(proto_dir, Path(self.build_lib) / "tensord" / "_proto")


setup(cmdclass={"build_py": BuildPyWithProtos})
