#!/usr/bin/env bash
# Each layer's target (CMakeLists.txt) builds with its own and the lower layers' folders only:
# a header of a higher layer cannot be included from a lower one (the compiler does not find
# it), and the same header compiles with its own layer's include path, so a failure is the
# path's and not the header's.
# Usage: check_layer_paths.sh CC LAYER OWN_DIR "DIR;DIR..." LAYER OWN_DIR "DIR;..." ...
# (bottom up: each layer's name, its own folder and its target's include path)
set -euo pipefail
cc=$1
shift
fail() { echo "check_layer_paths: $*" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

names=() owns=() paths=()
while [ $# -ge 3 ]; do names+=("$1"); owns+=("$2"); paths+=("$3"); shift 3; done
[ ${#names[@]} -ge 2 ] || fail "fewer than two layers given"

flags_of() {   # -I flags of one layer's include path
  local d
  local -a dirs
  IFS=';' read -r -a dirs <<< "$1"
  for d in "${dirs[@]}"; do [ -n "$d" ] && echo "-I$d"; done
}

checked=0
for ((j = 1; j < ${#names[@]}; j++)); do
  h=$(cd "${owns[j]}" && ls -1 -- *.h | head -n 1)
  [ -n "$h" ] || fail "no header in layer ${names[j]}"
  echo "#include \"$h\"" > "$tmp/t.c"
  mapfile -t own < <(flags_of "${paths[j]}")
  "$cc" -fsyntax-only -D_GNU_SOURCE -DPTWM_FORMAT_API "${own[@]}" "$tmp/t.c" 2> "$tmp/err" ||
    fail "$h does not compile with its own layer ${names[j]}'s path: $(cat "$tmp/err")"
  for ((i = 0; i < j; i++)); do
    mapfile -t low < <(flags_of "${paths[i]}")
    if "$cc" -fsyntax-only -D_GNU_SOURCE -DPTWM_FORMAT_API "${low[@]}" "$tmp/t.c" 2> "$tmp/err"; then
      fail "layer ${names[i]} can include $h of the higher layer ${names[j]}"
    fi
    grep -q "$h: No such file" "$tmp/err" ||
      fail "including $h from ${names[i]} failed for another reason: $(cat "$tmp/err")"
    checked=$((checked + 1))
  done
done
echo "check_layer_paths: $checked upward includes refused, each header compiling in its own layer"
