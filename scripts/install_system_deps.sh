#!/usr/bin/env bash
# System packages the tests need: redis-server (Debian), and the deployment linters
# (kubectl, promtool; see tests/deploy/install_tools.sh). Installs only what is missing.
set -euo pipefail
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
if ! command -v redis-server >/dev/null 2>&1; then
  echo "installing redis-server"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq redis-server >/dev/null
fi
echo "redis-server: $(redis-server --version | head -c 40)"
# headless Chromium and its driver for the dashboard's browser tests (tests/service/test_ui.py)
if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
  echo "installing chromium and chromium-driver"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium chromium-driver >/dev/null
fi
echo "chromium: $(chromium --version 2>/dev/null | head -c 40)"
if [ -f tests/deploy/install_tools.sh ]; then
  bash tests/deploy/install_tools.sh
fi
