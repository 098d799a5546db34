# Shared by the scripts: create or reuse the project's virtual environment.
set -eu
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
VENV="$ROOT/.venv"
PYTHON_BIN="${PYTHON:-python3}"
if [ ! -x "$VENV/bin/python" ]; then
  if ! version="$("$PYTHON_BIN" --version 2>&1)"; then
    echo "a2a-serverless: cannot create $VENV: $PYTHON_BIN does not run (set PYTHON to an interpreter's path):" >&2
    echo "$version" >&2
    exit 1
  fi
  echo "a2a-serverless: creating $VENV ($version)" >&2
  "$PYTHON_BIN" -m venv "$VENV"
fi
STAMP="$VENV/.installed"
CONSTRAINTS="$ROOT/shared/a2a_serverless/layer-constraints.txt"
# The moto the local stack's patches are written against (the `local` extra pins it too).
MOTO_CONSTRAINTS="$ROOT/shared/a2a_serverless/local/moto-constraints.txt"
if [ ! -f "$STAMP" ] || [ "$ROOT/pyproject.toml" -nt "$STAMP" ] || [ "$CONSTRAINTS" -nt "$STAMP" ] \
  || [ "$MOTO_CONSTRAINTS" -nt "$STAMP" ]; then
  echo "a2a-serverless: installing the project and its dev tools into .venv (first run: 1-3 minutes)..." >&2
  started=$(date +%s)
  "$VENV/bin/python" -m pip install --quiet --upgrade pip
  # The layer's packages at the versions it deploys with (scripts/pin_layer.py).
  "$VENV/bin/python" -m pip install --quiet -e "$ROOT[dev]" -c "$CONSTRAINTS" -c "$MOTO_CONSTRAINTS"
  touch "$STAMP"
  echo "a2a-serverless: installed in $(( $(date +%s) - started )) s" >&2
fi
export PYTHONPATH="$ROOT/shared${PYTHONPATH:+:$PYTHONPATH}"
cd "$ROOT"
