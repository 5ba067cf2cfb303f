#!/usr/bin/env bash
# Run safetensors' own Python tests (four files of bindings/python/tests at a
# pinned commit) against this checkout's ptwm package and build, only their
# imports rewritten to ptwm. Not part of CI: it needs a clone of safetensors.
# Usage: scripts/safetensors_suite.sh SAFETENSORS_CLONE [--commit SHA] [--keep] [-v]
#   PTWM_LIBRARY  the library to test (default build/libptwm.so of this checkout)
#   PTWM_PYTHON   the interpreter (default /usr/bin/python3, which has Debian's
#                 python3-torch and python3-numpy; scripts/deps.sh installs them)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
py=${PTWM_PYTHON:-/usr/bin/python3}
[[ -x "$py" ]] || py=python3
lib=${PTWM_LIBRARY:-$here/build/libptwm.so}
if [[ ! -f "$lib" ]]; then
  echo "safetensors_suite: no library at $lib (scripts/build.sh build, or set PTWM_LIBRARY)" >&2
  exit 2
fi
PYTHONPATH="$here/python${PYTHONPATH:+:$PYTHONPATH}" PTWM_LIBRARY=$(realpath "$lib") \
  exec "$py" "$here/scripts/safetensors_suite.py" "$@"
