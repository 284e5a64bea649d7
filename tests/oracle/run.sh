#!/usr/bin/env bash
# Differential test of wafer against ModSecurity v3 (libmodsecurity) on the CRS.
#
#   tests/oracle/run.sh [compare.py options]
#
# Environment:
#   WAFER_BIN        wafer CLI to test (default: target/release/wafer; this script builds nothing)
#   CRS_DIR          OWASP CRS checkout (default: ../shared/coreruleset)
#   ORACLE_VARIANTS  number of generated request variants (default 5000)
#   ORACLE_JOBS      parallel ModSecurity processes (default 2)
#   PYTHON           interpreter used to create the venv (default: python3)
#
# Installs (once) a venv at .venv-oracle in the repository root with the
# ModSecurity Python bindings and PyYAML. Ends with "N passed, N failed" and
# exits non-zero when a disagreement is not explained by known_differences.yaml.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
cd "$repo"

venv="$repo/.venv-oracle"
py="$venv/bin/python"
modsec_pkg="libmodsecurity==3.0.15.post2"

if ! "$py" -c 'import libmodsecurity, yaml' 2>/dev/null; then
    echo "oracle: setting up $venv ($modsec_pkg, pyyaml)" >&2
    "${PYTHON:-python3}" -m venv "$venv"
    echo '*' > "$venv/.gitignore"   # keep the venv out of git status
    "$py" -m pip install --quiet --disable-pip-version-check "$modsec_pkg" pyyaml >&2 ||
        "$py" -m pip install --quiet --disable-pip-version-check 'libmodsecurity>=3.0.15,<3.0.16' pyyaml >&2
fi

export WAFER_BIN="${WAFER_BIN:-target/release/wafer}"
export CRS_DIR="${CRS_DIR:-$repo/../shared/coreruleset}"
if [ ! -x "$WAFER_BIN" ]; then
    echo "oracle: wafer binary $WAFER_BIN not found; build it first:" >&2
    echo "  CRS_DIR=$CRS_DIR cargo build --release -p wafer-cli" >&2
    echo "0 passed, 1 failed"
    exit 1
fi

# The operators the CRS does not use (@verifyCC/SSN/CPF/SVNR) on generated values first.
"$py" "$here/operators.py" --wafer "$WAFER_BIN" || { echo "0 passed, 1 failed"; exit 1; }
# Transformation outputs, byte for byte, on generated values (transforms.py).
"$py" "$here/transforms.py" --wafer "$WAFER_BIN" || { echo "0 passed, 1 failed"; exit 1; }
# @detectXSS / @detectSQLi verdicts and fingerprints on generated values (libinjection.py).
"$py" "$here/libinjection.py" --wafer "$WAFER_BIN" || { echo "0 passed, 1 failed"; exit 1; }
exec "$py" "$here/compare.py" --wafer "$WAFER_BIN" --crs "$CRS_DIR" "$@"
