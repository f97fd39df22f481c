#!/usr/bin/env bash
# The release step (`make release-snapshot`): records the API version named in VERSION as
#   op_defs/history/api-<N>.yaml          the op set, for the compatibility checker
#   abi/libesgraph-api-<N>.abi            the ABI baseline, for abidiff
#   tests/compat/api-<N>/include          the public headers, for old-client tests
#   tests/compat/api-<N>/graphs           graph files, which every later version must load
# Then move `api` (and `version`) on in VERSION. Run after `make build`.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$top/build/default}
api=$(sed -n 's/^api: *\([0-9]*\).*/\1/p' "$top/VERSION")
out="$top/tests/compat/api-$api"
"$top/scripts/codegen.sh" snapshot
"$top/scripts/abi-check.sh" --record "$build/c_api/libesgraph.so" "$build/generated/include" "$api"
rm -rf "$out"
mkdir -p "$out/include/esgraph/c" "$out/graphs"
cp "$top"/include/esgraph/*.hpp "$out/include/esgraph/"
cp "$top"/include/esgraph/c/*.h "$build"/generated/include/esgraph/c/*.h "$out/include/esgraph/c/"
cp "$build"/generated/include/esgraph/*.hpp "$out/include/esgraph/"
"$build/tests/compat/write_graph_fixtures" "$out/graphs"
echo "release-snapshot: API $api recorded; now move \`api\` on in VERSION"
