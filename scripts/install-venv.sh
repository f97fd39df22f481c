#!/usr/bin/env bash
# Creates the project's Python environment (.venv, on Debian's /usr/bin/python3, whose headers
# python3-dev provides) and installs requirements.txt into it. Idempotent: nothing is installed
# when the environment already holds this requirements.txt (a stamp records its hash).
# Every script, test and build step runs with .venv/bin/python; CMake builds the Python module
# against it.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
venv=$top/.venv
requirements=$top/requirements.txt
# --system-site-packages: Debian's Python packages stay visible beneath the pins.
[ -x "$venv/bin/python" ] || /usr/bin/python3 -m venv --system-site-packages "$venv"
stamp=$venv/requirements.sha256
want=$(sha256sum "$requirements" | cut -d' ' -f1)
[ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && exit 0
echo "installing requirements.txt into .venv"
"$venv/bin/python" -m pip install --disable-pip-version-check --no-input -q -r "$requirements"
echo "$want" >"$stamp"
