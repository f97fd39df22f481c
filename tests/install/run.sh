#!/usr/bin/env bash
# The install proofs: what a user of an installed esgraph does, from outside the source tree.
#   run.sh <build dir> <source dir>      (works in a temporary folder outside both, removed after)
# 1. cmake --install into a temporary prefix; 2. a separate CMake project with find_package;
# 3. a C99 program with pkg-config; 4. the installed Python package; 5. a wheel made with
# `python3 -m build`, installed into a fresh venv and imported there; 6. the .deb of `cpack`.
set -euo pipefail
build=$(realpath "$1") src=$(realpath "$2")
work=$(mktemp -d "${TMPDIR:-/tmp}/esgraph-install.XXXXXX")
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
for component in library python; do cmake --install "$build" --prefix "$prefix" --component "$component" >/dev/null; done
libdir=$(dirname "$(find "$prefix" -name 'libesgraph.so' -print -quit)")

cmake -S "$src/tests/install/consumer" -B "$work/consumer" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$work/consumer" >/dev/null
"$work/consumer/consumer"

flags=$(PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --cflags --libs esgraph)
cc -std=c99 -pedantic -Wall -Werror "$src/tests/install/consumer.c" $flags -o "$work/consumer_c"
LD_LIBRARY_PATH="$libdir" "$work/consumer_c"

cd "$work"
export ESG_SOURCE_DIR=$src
PYTHONPATH=$(dirname "$(find "$prefix" -path '*/esgraph/__init__.py' -print -quit)")/.. /usr/bin/python3 "$src/tests/install/consumer.py" "cmake --install"

/usr/bin/python3 -m venv --system-site-packages "$work/venv"
# (From the scratch folder, as a user's build of a downloaded source would run.)
ESG_CMAKE_BUILD_DIR="$build" /usr/bin/python3 -m build --no-isolation --wheel --outdir "$work/dist" "$src" >"$work/wheel.log" 2>&1 ||
  { tail -20 "$work/wheel.log"; exit 1; }
"$work/venv/bin/pip" install --no-index --no-deps --quiet "$work"/dist/esgraph-*.whl
"$work/venv/bin/python" "$src/tests/install/consumer.py" "wheel in a venv"
# torch.compile(backend="esgraph") finds an installed esgraph by its entry point.
"$work/venv/bin/python" -c "
from importlib.metadata import entry_points
(ep,) = entry_points(group='torch_dynamo_backends', name='esgraph')
assert ep.value == 'esgraph.torch._backend:esgraph_backend', ep.value
print('entry point (torch_dynamo_backends): ok,', ep.value)"

(cd "$build" && cpack -G DEB -B "$work/deb" >"$work/deb.log" 2>&1) || { tail -20 "$work/deb.log"; exit 1; }
deb=$(ls "$work"/deb/esgraph_*.deb)
contents=$(dpkg-deb -c "$deb")
for want in usr/lib/libesgraph.so.0 usr/include/esgraph/esgraph.hpp usr/include/esgraph/ops.hpp usr/lib/cmake/esgraph/esgraphConfig.cmake \
            usr/lib/pkgconfig/esgraph.pc usr/lib/python3/dist-packages/esgraph/__init__.py; do
  grep -q "\./$want" <<<"$contents" || { echo "the .deb lacks $want"; exit 1; }
done
echo "package (cpack -G DEB): ok, $(basename "$deb"), depends on: $(dpkg-deb -f "$deb" Depends)"
