#!/usr/bin/env bash
# The verifiers end-to-end tier (`make e2e`).
#
# Bootstraps .e2e/venv from a fresh clone: verifiers 0.4.0 and uv (which pull the
# published prime-runs), then THIS checkout installed over that prime-runs without
# dependencies, then this package's own runtime dependencies that are still missing.
# The venv is rebuilt only when e2e/requirements.txt or pyproject.toml change. The uv
# cache and verifiers' runtime directories live under .e2e/ too, so a second run (and
# the second eval inside one run) reuses the null harness's chat-program environment.
# .e2e/peer-venv holds the published prime-runs 0.1.4 (e2e/peer-requirements.txt), which
# the training parity test runs beside this checkout.
#
# Extra arguments go to pytest, which runs from e2e/: `e2e/run.sh tests/test_eval.py -x`.
set -euo pipefail

cd "$(dirname "$0")/.."
root="$(pwd)"
state="$root/.e2e"
venv="$state/venv"
python="${PYTHON:-python3}"
stamp="$venv/.installed"

# verifiers 0.4.0 needs Python 3.11+ (the package itself supports 3.10).
if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  echo "e2e: verifiers 0.4.0 needs Python >= 3.11; set PYTHON=python3.11 (or newer)" >&2
  exit 2
fi
want="$(cat e2e/requirements.txt pyproject.toml | "$python" -c \
  'import hashlib, sys; print(hashlib.sha256(sys.stdin.buffer.read()).hexdigest())')"

if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "e2e: building $venv" >&2
  rm -rf "$venv"
  "$python" -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --upgrade pip
  "$venv/bin/python" -m pip install --quiet -r e2e/requirements.txt
  # Ours over the prime-runs verifiers pulled in, leaving verifiers' resolution alone...
  "$venv/bin/python" -m pip install --quiet --no-deps -e .
  # ...then whatever of our own runtime dependencies verifiers did not bring.
  "$venv/bin/python" - >"$state/runtime-deps.txt" <<'EOF'
import importlib.metadata as md

for req in md.requires("prime-runs") or []:
    if "extra ==" not in req:
        print(req)
EOF
  "$venv/bin/python" -m pip install --quiet -r "$state/runtime-deps.txt"
  echo "$want" >"$stamp"
fi

# The published 0.1.4, for the training parity test: a venv of its own.
peer="$state/peer-venv"
peer_want="$("$python" -c 'import hashlib, sys; print(hashlib.sha256(sys.stdin.buffer.read()).hexdigest())' \
  <e2e/peer-requirements.txt)"
if [ ! -f "$peer/.installed" ] || [ "$(cat "$peer/.installed")" != "$peer_want" ]; then
  echo "e2e: building $peer" >&2
  rm -rf "$peer"
  "$python" -m venv "$peer"
  "$peer/bin/python" -m pip install --quiet --upgrade pip
  "$peer/bin/python" -m pip install --quiet -r e2e/peer-requirements.txt
  echo "$peer_want" >"$peer/.installed"
fi

mkdir -p "$state/home" "$state/uv-cache"
export E2E_STATE_DIR="$state"
cd e2e
exec "$venv/bin/python" -m pytest -c pytest.ini "$@"
