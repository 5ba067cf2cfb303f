#!/usr/bin/env bash
# scripts/check_layers.py finds what it promises: in a small tree of layer folders, an upward
# include (a bare name the include path resolves to a higher layer) and an upward reference
# (a call through no internal header, seen in the object files); downward ones pass.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
check=$here/scripts/check_layers.py
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "check_layers_test: $*" >&2; exit 1; }

src=$tmp/src
mkdir -p "$src/platform" "$src/codec" "$src/codec/kernels" "$src/formats" "$tmp/obj/src"
echo '#define X 1' > "$src/common.h"
echo 'int codec_fn(void);' > "$src/codec/codec.h"
echo 'int formats_fn(void);' > "$src/formats/formats.h"
printf '#include "common.h"\nint platform_fn(void);\nint platform_fn(void) { return X; }\n' \
  > "$src/platform/p.c"
printf '#include "common.h"\n#include "codec.h"\nint codec_fn(void) { return 2; }\n' \
  > "$src/codec/c.c"
# Downward, and from the kernels folder to its own layer's header by the include path.
printf '#include "codec.h"\nint k_fn(void);\nint k_fn(void) { return codec_fn(); }\n' \
  > "$src/codec/kernels/k.c"
printf '#include "codec.h"\n#include "formats.h"\nint formats_fn(void) { return codec_fn(); }\n' \
  > "$src/formats/f.c"

out=$("$check" --src "$src") || fail "a tree with only downward includes was refused: $out"
grep -q '^upward includes: 0$' <<< "$out" || fail "unexpected report: $out"

# An upward include: platform names a codec header.
printf '#include "codec.h"\n' >> "$src/platform/p.c"
if out=$("$check" --src "$src"); then fail "an upward include passed: $out"; fi
grep -q 'src/platform/p.c:4: platform includes "codec.h" (src/codec/codec.h, layer codec)' \
  <<< "$out" || fail "the upward include is not named: $out"
sed -i '4d' "$src/platform/p.c"

# An upward reference: platform calls formats with no include at all.
printf 'int formats_fn(void);\nint p2(void);\nint p2(void) { return formats_fn(); }\n' \
  >> "$src/platform/p.c"
cc=${CC:-cc}
for f in platform/p.c codec/c.c codec/kernels/k.c formats/f.c; do
  mkdir -p "$(dirname "$tmp/obj/src/$f")"
  "$cc" -c -I"$src" -I"$src/codec" -I"$src/formats" "$src/$f" -o "$tmp/obj/src/$f.o"
done
if out=$("$check" --src "$src" --objects "$tmp/obj"); then fail "an upward call passed: $out"; fi
grep -q '^upward includes: 0$' <<< "$out" || fail "unexpected includes: $out"
grep -q 'src/platform/p.c (platform) uses formats_fn of src/formats/f.c (layer formats)' \
  <<< "$out" || fail "the upward call is not named: $out"
grep -q 'codec_fn' <<< "$out" && fail "a downward call was reported: $out"
echo "check_layers_test: ok"
