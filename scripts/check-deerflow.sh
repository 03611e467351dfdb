#!/usr/bin/env bash
# Check deermem as DeerFlow's memory backend, inside a real DeerFlow checkout.
#
#   scripts/check-deerflow.sh DEERFLOW_CHECKOUT [RESULTS_DIR]
#
# 1. Syncs the checkout's backend environment the way DeerFlow's docs do
#    (`uv sync` in backend/, Python >= 3.12; set PYTHON to choose the interpreter)
#    and installs this deermem into it.
# 2. Runs DeerFlow's own memory tests (the four files below) twice: as they are,
#    with deermem installed; and with deermem selected by dotted path as the
#    process's configured backend (tests/integrations/deerflow_host/deermem_selected.py),
#    which also reports which of those tests actually built a deermem backend.
# 3. Runs the host checks (tests/integrations/deerflow_host/host_checks.py): discovery
#    through DeerFlow's factory, signature parity with DeerFlow's MemoryManager, a round
#    trip (the bundled DeerMem writes, deermem reads and writes, the bundled DeerMem reads
#    back), DeerFlow's memory settings API, its tool-mode tools, middleware and prompt.
#
# Logs and the report go to RESULTS_DIR (default: a new temporary directory). Exits
# non-zero if anything failed. Needs network access to PyPI for the first sync.
set -euo pipefail

if [[ $# -lt 1 || $# -gt 2 ]]; then
    echo "usage: $0 DEERFLOW_CHECKOUT [RESULTS_DIR]" >&2
    exit 2
fi
checkout=$(cd "$1" && pwd)
backend=$checkout/backend
deermem=$(cd "$(dirname "$0")/.." && pwd)
host=$deermem/tests/integrations/deerflow_host
results=${2:-$(mktemp -d -t deermem-deerflow-XXXXXX)}
mkdir -p "$results"
results=$(cd "$results" && pwd)

if [[ ! -f $backend/packages/harness/deerflow/agents/memory/manager.py ]]; then
    echo "$checkout does not look like a DeerFlow checkout (no backend/packages/harness/deerflow)" >&2
    exit 2
fi

# A pyenv shim for uv resolves by the current directory's .python-version; DeerFlow's
# backend pins 3.12, so resolve the real uv here, before changing directory.
uv=${UV:-uv}
if command -v pyenv >/dev/null 2>&1 && [[ $(command -v "$uv") == */shims/* ]]; then
    uv=$(cd "$deermem" && pyenv which uv)
fi

echo "== DeerFlow $(git -C "$checkout" rev-parse --short HEAD 2>/dev/null || echo '(not a git checkout)') at $checkout"
echo "== results in $results"

cd "$backend"
"$uv" sync --python "${PYTHON:-3.12}" >"$results/sync.log" 2>&1 || {
    echo "uv sync failed; see $results/sync.log" >&2
    exit 1
}
python=$backend/.venv/bin/python
"$python" -c 'import sys; assert sys.version_info >= (3, 12), sys.version' || {
    echo "DeerFlow needs Python >= 3.12; set PYTHON to such an interpreter" >&2
    exit 1
}
# Installed after the sync and run without `uv run`, which would sync it away again.
"$uv" pip install --python "$python" "$deermem" >"$results/install.log" 2>&1 || {
    echo "installing deermem failed; see $results/install.log" >&2
    exit 1
}
echo "== $("$python" --version), deermem $("$python" -c 'import importlib.metadata as m; print(m.version("deermem"))')"

deerflow_tests=(
    tests/test_memory_manager_interface.py
    tests/test_memory_manager_pluggable.py
    tests/test_memory_router.py
    tests/test_memory_tools.py
)
status=0

run() {  # run NAME PYTEST-ARGS...: one pytest session, its log, its summary line
    local name=$1
    shift
    if PYTHONPATH=".:tests:$host" "$python" -m pytest -p no:cacheprovider -rA "$@" >"$results/$name.log" 2>&1; then
        printf '%-24s %s\n' "$name" "$(tail -n 1 "$results/$name.log")"
    else
        printf '%-24s FAILED: %s (see %s)\n' "$name" "$(tail -n 1 "$results/$name.log")" "$results/$name.log"
        status=1
    fi
}

run deerflow-tests -m "not live" "${deerflow_tests[@]}"
DEERMEM_CHECK_REPORT=$results/selected.json run deerflow-tests-selected \
    -m "not live" -p deermem_selected "${deerflow_tests[@]}"
run host-checks -c pyproject.toml --rootdir . "$host/host_checks.py"

echo "== DeerFlow tests that built a deermem backend when it was the configured one:"
"$python" -c 'import json, sys; built = json.load(open(sys.argv[1]))["built_deermem"]; print("\n".join(built) or "(none)")' \
    "$results/selected.json"
exit $status
