#!/usr/bin/env bash
# Check that a library built with -DPTWM_NO_SIMD holds only baseline x86-64
# code: no AVX, AVX2 or AVX-512 (VEX and EVEX forms all start with "v" or use
# ymm, zmm or mask registers), no BMI1/BMI2, LZCNT, POPCNT, MOVBE, SSSE3 or
# SSE4 instructions. tzcnt is allowed: it is how objdump shows the "rep bsf"
# GCC emits for __builtin_ctz, which runs as bsf on CPUs without BMI1.
# Usage: scripts/check_no_simd.sh LIBRARY (a .a or .so; other CPUs pass trivially).
set -euo pipefail
lib=$1
case "$(uname -m)" in x86_64) ;; *) echo "check_no_simd: not x86-64, nothing to check"; exit 0 ;; esac
bad='^(v[a-z0-9]+|andn|bextr|blsi|blsmsk|blsr|bzhi|mulx|pdep|pext|rorx|sarx|shlx|shrx|lzcnt|popcnt|movbe'
bad+='|pshufb|palignr|phadd[a-z]*|phsub[a-z]*|pmaddubsw|pmulhrsw|pabs[bwd]|psign[bwd]'
bad+='|pblendvb|pblendw|blendv?p[sd]|pmov[sz]x[a-z]*|ptest|pmin[su][bdw]|pmax[su][dw]|pmaxsb|pmulld|pmuldq'
bad+='|pextr[bdq]|pinsr[bdq]|round[ps][sd]|dpp[sd]|packusdw|pcmpeqq|pcmpgtq|mpsadbw|phminposuw'
bad+='|insertps|extractps|movntdqa|crc32[a-z]*|pcmp[ei]str[im])$'
found=$(objdump -d --no-show-raw-insn "$lib" |
  awk -F'\t' '/^[0-9a-f]+ <.*>:$/ {fn = $0} /^ *[0-9a-f]+:\t/ {split($2, a, " "); print a[1] "\t" fn}' |
  grep -E "$(printf '%s' "$bad" | sed 's/\$$/\t/')" | sort | uniq -c | sort -rn || true)
regs=$(objdump -d --no-show-raw-insn "$lib" | grep -cE '%(ymm|zmm)[0-9]|%k[0-7]\b' || true)
if [[ -n "$found" || "$regs" != 0 ]]; then
  echo "check_no_simd: $lib has instructions beyond baseline x86-64 ($regs use ymm, zmm or mask registers):"
  printf '%s\n' "$found" | head -n 40
  exit 1
fi
echo "check_no_simd: $lib holds baseline x86-64 code only"
