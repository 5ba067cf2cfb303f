#!/usr/bin/env bash
# Check the instruction-set promises by disassembly (x86-64; elsewhere both pass trivially).
#
#   scripts/check_isa.sh portable LIBRARY
#     A library built with -DPTWM_NO_SIMD holds only baseline x86-64 code.
#   scripts/check_isa.sh run LEVEL PROGRAM [ARGS...]
#     PROGRAM (linked with the static library) run under gdb with PTWM_ISA=LEVEL executes no
#     instruction above LEVEL: a breakpoint sits on every such instruction and none may be hit.
#     LEVEL scalar: nothing beyond baseline x86-64; avx2: no AVX-512 (EVEX) instruction.
#
# Beyond baseline: AVX, AVX2 and AVX-512 (VEX and EVEX forms all start with "v", or use ymm,
# zmm or mask registers), BMI1/BMI2, LZCNT, POPCNT, MOVBE, SSSE3 and SSE4. tzcnt is allowed:
# it is how objdump shows the "rep bsf" GCC emits for __builtin_ctz, which runs as bsf on CPUs
# without BMI1.
set -euo pipefail
mode=${1:-}
case "$(uname -m)" in x86_64) ;; *) echo "check_isa: not x86-64, nothing to check"; exit 0 ;; esac

beyond='^(v[a-z0-9]+|andn|bextr|blsi|blsmsk|blsr|bzhi|mulx|pdep|pext|rorx|sarx|shlx|shrx|lzcnt'
beyond+='|popcnt|movbe|pshufb|palignr|phadd[a-z]*|phsub[a-z]*|pmaddubsw|pmulhrsw|pabs[bwd]'
beyond+='|psign[bwd]|pblendvb|pblendw|blendv?p[sd]|pmov[sz]x[a-z]*|ptest|pmin[su][bdw]|pmax[su][dw]'
beyond+='|pmaxsb|pmulld|pmuldq|pextr[bdq]|pinsr[bdq]|round[ps][sd]|dpp[sd]|packusdw|pcmpeqq'
beyond+='|pcmpgtq|mpsadbw|phminposuw|insertps|extractps|movntdqa|crc32[a-z]*|pcmp[ei]str[im])$'

# "ADDRESS<TAB>MNEMONIC<TAB>FUNCTION" for each instruction above the level: scalar or avx2
# (EVEX: first opcode byte 0x62, never a valid instruction start in 64-bit mode otherwise).
above() {
  objdump -d "$2" | awk -F'\t' -v level="$1" -v beyond="$beyond" '
    /^[0-9a-f]+ <.*>:$/ { fn = $0; sub(/^[0-9a-f]+ /, "", fn); sub(/:$/, "", fn); next }
    /^ *[0-9a-f]+:\t/ {
      if (NF < 3) next
      addr = $1; sub(/^ */, "", addr); sub(/:$/, "", addr)
      split($3, a, " "); m = a[1]
      split($2, b, " ")
      if (level == "avx2") hit = (b[1] == "62" || (b[1] == "67" && b[2] == "62"))
      else hit = (m ~ beyond || $3 ~ /%(ymm|zmm)[0-9]|%k[0-7]/)
      if (hit) print addr "\t" m "\t" fn
    }'
}

case "$mode" in
portable)
  lib=$2
  found=$(above scalar "$lib" | cut -f2,3 | sort | uniq -c | sort -rn)
  if [[ -n "$found" ]]; then
    echo "check_isa: $lib has instructions beyond baseline x86-64:"
    printf '%s\n' "$found" | head -n 40
    exit 1
  fi
  echo "check_isa: $lib holds baseline x86-64 code only"
  ;;
run)
  level=$2 prog=$3
  shift 3
  [[ "$level" == scalar || "$level" == avx2 ]] || { echo "check_isa: level scalar or avx2" >&2; exit 2; }
  command -v gdb >/dev/null || { echo "check_isa: gdb is needed (scripts/deps.sh)" >&2; exit 1; }
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  above "$level" "$prog" > "$tmp/above"
  n=$(wc -l < "$tmp/above")
  if [[ $n == 0 ]]; then
    echo "check_isa: $prog holds no instruction above $level"
    PTWM_ISA=$level "$prog" "$@"
    exit
  fi
  # gdb runs position-independent programs without address randomisation: the load base is
  # fixed, so each breakpoint goes at base + the disassembly's address (0 base if not PIE).
  base=0
  if readelf -h "$prog" | grep -q 'DYN'; then base=0x555555554000; fi
  {
    echo "set pagination off"
    echo "set confirm off"
    echo "set breakpoint pending off"
    echo "starti"
    awk -v base="$base" '{ printf "break *(%s + 0x%s)\n", base, $1 }' "$tmp/above"
    echo "continue"
    echo "info registers rip"
  } > "$tmp/cmds"
  # LeakSanitizer cannot run under ptrace: a sanitizer build checks leaks in its other tests.
  PTWM_ISA=$level ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 \
    gdb -nx -batch -x "$tmp/cmds" --args "$prog" "$@" > "$tmp/log" 2>&1 || true
  if grep -q '^Breakpoint [0-9]*, ' "$tmp/log"; then
    echo "check_isa: with PTWM_ISA=$level, $prog ran an instruction above $level:"
    grep -A4 '^Breakpoint [0-9]*, ' "$tmp/log" | head -n 8
    exit 1
  fi
  if ! grep -q 'exited normally' "$tmp/log"; then
    echo "check_isa: $prog did not exit normally under gdb:"
    tail -n 30 "$tmp/log"
    exit 1
  fi
  echo "check_isa: with PTWM_ISA=$level, none of the $n instructions above $level in $prog ran"
  ;;
*)
  echo "usage: scripts/check_isa.sh portable LIBRARY | run LEVEL PROGRAM [ARGS...]" >&2
  exit 2
  ;;
esac
