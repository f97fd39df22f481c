"""Builds the esgraph Python package through CMake: the extension links the C++ core, which only
the project's CMake build knows how to make. The package is what `cmake --install` puts in its
python component, with libesgraph.so beside the extension (component wheel), so a wheel carries
its library. pyproject.toml holds the metadata; this file only supplies the build step."""
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = pathlib.Path(__file__).resolve().parent


def version():
    return re.search(r"^version: *([0-9.]+)", (ROOT / "VERSION").read_text(), re.M).group(1)


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        build = pathlib.Path(os.environ.get("ESG_CMAKE_BUILD_DIR") or ROOT / "build" / "wheel").resolve()
        if not (build / "CMakeCache.txt").exists():
            subprocess.check_call(["cmake", "-S", str(ROOT), "-B", str(build), "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
                                   f"-DPython3_EXECUTABLE={sys.executable}", "-DESG_BUILD_TESTS=OFF",
                                   "-DESG_BUILD_SAMPLES=OFF", "-DESG_BUILD_BENCH=OFF"])
        jobs = os.environ.get("ESG_JOBS", "2")
        subprocess.check_call(["cmake", "--build", str(build), "--target", "esgraph_py", "esgraph_py_files", "-j", jobs])
        with tempfile.TemporaryDirectory() as prefix:
            for component in ("python", "wheel"):
                subprocess.check_call(["cmake", "--install", str(build), "--component", component, "--prefix", prefix])
            installed = next(pathlib.Path(prefix).glob("**/esgraph/__init__.py")).parent
            target = pathlib.Path(self.build_lib) / "esgraph"
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(installed, target)


# Build metadata (egg-info) goes to build/, not beside the sources.
(ROOT / "build").mkdir(exist_ok=True)
setup(version=version(), ext_modules=[Extension("esgraph._C", sources=[])], cmdclass={"build_ext": CMakeBuild},
      options={"egg_info": {"egg_base": "build"}})
