#!/usr/bin/env bash
# Compares libesgraph's ABI (exported functions and the types of the public headers) with every
# recorded baseline in abi/: an incompatible change fails, compatible changes are reported.
#   scripts/abi-check.sh <libesgraph.so> <generated include dir>
#   scripts/abi-check.sh --record <libesgraph.so> <generated include dir> <api>   (release step)
# ESG_ABI_CURRENT=<file.abi> compares that dump instead of dumping the library, and
# ESG_ABI_BASELINES=<dir> takes the baselines from there (both for the script's own tests).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
record=""
if [ "${1:-}" = "--record" ]; then record=1; shift; fi
lib=$1 gen=$2
command -v abidw >/dev/null || { echo "abi-check: abidw not found (Debian: abigail-tools)"; exit 1; }
dump() {
  abidw --no-corpus-path --exported-interfaces-only --no-show-locs --drop-private-types \
    --headers-dir "$top/include/esgraph" --headers-dir "$gen/esgraph" --out-file "$1" "$lib"
}
if [ -n "$record" ]; then
  mkdir -p "$top/abi"
  dump "$top/abi/libesgraph-api-$3.abi"
  echo "abi-check: recorded abi/libesgraph-api-$3.abi"
  exit 0
fi
if [ -n "${ESG_ABI_CURRENT:-}" ]; then
  current=$ESG_ABI_CURRENT
else
  current=$(mktemp --suffix=.abi)
  trap 'rm -f "$current"' EXIT
  dump "$current"
fi
shopt -s nullglob
baselines=("${ESG_ABI_BASELINES:-$top/abi}"/libesgraph-api-*.abi)
[ ${#baselines[@]} -gt 0 ] || { echo "abi-check: no baseline in abi/"; exit 1; }
status=0
for base in "${baselines[@]}"; do
  set +e
  report=$(abidiff --no-added-syms "$base" "$current")
  rc=$?
  added=$(abidiff "$base" "$current" | grep -E "^ *\[A\]" || true)
  set -e
  name=$(basename "$base")
  if (( rc & 8 )); then
    echo "abi-check: INCOMPATIBLE with $name:"; echo "$report"; status=1
  elif (( rc & 3 )); then
    echo "abi-check: abidiff failed on $name (exit $rc):"; echo "$report"; status=1
  elif (( rc & 4 )); then
    echo "abi-check: compatible changes against $name:"; echo "$report"
  else
    echo "abi-check: identical to $name"
  fi
  [ -n "$added" ] && echo "abi-check: additions against $name: $added"
done
exit $status
