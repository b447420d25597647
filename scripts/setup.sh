#!/usr/bin/env bash
# Installs what dtrain needs to build, test and run on Debian 12. Idempotent: when every package is
# present it only checks (well under a second) and touches nothing.
# Usage: scripts/setup.sh [--bench]   (--bench adds the peers the benchmarks compare against)
set -euo pipefail

packages=(build-essential cmake libtorch-dev libgloo-dev libopenblas0-pthread
          nlohmann-json3-dev libcli11-dev libgtest-dev fortunes-min fortunes procps)
if [[ "${1:-}" == "--bench" ]]; then
  packages+=(python3-torch openmpi-bin libopenmpi-dev)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=()
  [[ $(id -u) -ne 0 ]] && sudo_cmd=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
