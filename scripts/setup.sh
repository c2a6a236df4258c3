# Sourced by the README's commands: make .venv (once) with torch, the package and its test tools, then use it.
# torch is installed first, pinned, so that pip does not pull a multi-GB build when a CPU wheel is at hand;
# set MT_TORCH to choose another (e.g. MT_TORCH="torch==2.13.0 --index-url https://download.pytorch.org/whl/cu126").
# The package is installed again when pyproject.toml has changed since (new dependencies).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [ ! -x "$root/.venv/bin/mt" ]; then
  echo "setting up $root/.venv (one time)"
  python3 -m venv "$root/.venv"
  "$root/.venv/bin/pip" install -qq --upgrade pip
  # shellcheck disable=SC2086
  "$root/.venv/bin/pip" install -qq ${MT_TORCH:-torch==2.13.0}
fi
if [ ! -f "$root/.venv/.installed" ] || [ "$root/pyproject.toml" -nt "$root/.venv/.installed" ]; then
  "$root/.venv/bin/pip" install -qq -e "$root[test]"
  touch "$root/.venv/.installed"
fi
# The npm LibreTranslate client, for the test that serves it (skipped where there is no node).
if command -v npm >/dev/null && [ ! -d "$root/.venv/node/node_modules/libretranslate" ]; then
  npm install --prefix "$root/.venv/node" --no-audit --no-fund --silent libretranslate@1.0.1 || true
fi
export PATH="$root/.venv/bin:$PATH"
