# Sourced by the README's commands: make .venv (once) with torch, the package and its test tools, then use it.
# torch is installed first, pinned, so that pip does not pull a multi-GB build when a CPU wheel is at hand;
# set MT_TORCH to choose another (e.g. MT_TORCH="torch==2.13.0 --index-url https://download.pytorch.org/whl/cu126").
# The package is installed again when pyproject.toml has changed since (new dependencies).
# The work runs in a subshell with its own strict options, so that sourcing this file from an interactive shell
# leaves that shell's options (errexit, nounset, pipefail) as they were; only PATH changes.
_mt_setup() (
  set -euo pipefail
  root=$1
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
)
_mt_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# Called as a plain command, not as an `if` condition: bash ignores errexit in a condition, subshells included.
_mt_setup "$_mt_root"
if [ $? -eq 0 ]; then
  case ":$PATH:" in *":$_mt_root/.venv/bin:"*) ;; *) export PATH="$_mt_root/.venv/bin:$PATH" ;; esac
  unset -f _mt_setup; unset _mt_root
else
  echo "set-up of $_mt_root/.venv failed (see docs/setup.md#troubleshooting)" >&2
  unset -f _mt_setup; unset _mt_root
  return 1
fi
