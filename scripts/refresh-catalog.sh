#!/usr/bin/env bash
# Maintainer workflow: refresh the stock catalog from upstream and show the diff for review.
#
#   scripts/refresh-catalog.sh [--redist FILE_OR_URL]... [OUT_DIR]
#
# 1. `gpustack catalog outdated` lists, per family, the releases upstream has and the
#    catalog lacks (PyPI for torch, vLLM, DeepSpeed, cuDNN/NCCL wheels and the extras; the
#    NVIDIA redistrib manifests given with --redist for CUDA and cuDNN).
# 2. One `gpustack catalog import pypi` (and `import redist`) run writes them as an
#    overlay into OUT_DIR/overlay (default: target/catalog-refresh/overlay), each entry
#    with its source URL and today's date; facts upstream does not carry (arch lists,
#    driver minimums, rules) are listed as "not derived".
# 3. The overlay is loaded on top of the stock catalog and `catalog show` is diffed per
#    family into OUT_DIR/catalog.diff.
# 4. `gpustack catalog import installability` recomputes, in a copy of catalog/
#    (OUT_DIR/catalog), every PyPI release's yanked status, glibc floor, torch's triton pin
#    and cuDNN/NCCL platforms; the changes are in OUT_DIR/installability.diff.
#
# Nothing under catalog/ is changed: review the diff, fill in what was not derived, and
# move the entries into catalog/*.toml by hand (then `cargo test --test cli`, see the
# book's "Changing the stock catalog"). GPUSTACK overrides the binary (default: a debug
# build of this checkout).
set -euo pipefail
cd "$(dirname "$0")/.."

redist=()
out=target/catalog-refresh
while [ "$#" -gt 0 ]; do
  case "$1" in
    --redist) redist+=(--redist "$2"); shift 2 ;;
    -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
    *) out=$1; shift ;;
  esac
done

if [ -z "${GPUSTACK:-}" ]; then
  cargo build --quiet
  GPUSTACK=$PWD/target/debug/gpustack
fi
today=$(date -u +%F)
rm -rf "$out"
mkdir -p "$out"

echo "== what upstream has that the catalog lacks"
"$GPUSTACK" catalog outdated "${redist[@]}" --date "$today" | tee "$out/outdated.txt"

pypi_args=()
while IFS= read -r line; do
  read -ra words <<<"${line#  import: gpustack catalog import pypi }"
  pypi_args+=("${words[@]}")
done < <(grep '^  import: gpustack catalog import pypi ' "$out/outdated.txt" || true)

manifests=()
for ((i = 1; i < ${#redist[@]}; i += 2)); do manifests+=("${redist[$i]}"); done

echo "== installability (yanked, glibc floor, triton, platforms) of the releases the catalog has"
cp -r catalog "$out/catalog"
"$GPUSTACK" catalog import installability --dir "$out/catalog" --date "$today" | tee "$out/installability.txt"
diff -ru --label catalog --label "catalog (installability from PyPI today)" catalog "$out/catalog" >"$out/installability.diff" || true
if [ -s "$out/installability.diff" ]; then
  echo "== installability changed: review $out/installability.diff (cp $out/catalog/*.toml catalog/ to take it)"
fi

if [ "${#pypi_args[@]}" -eq 0 ] && [ "${#manifests[@]}" -eq 0 ]; then
  echo "== no new releases upstream"
  exit 0
fi
mkdir -p "$out/overlay"
if [ "${#pypi_args[@]}" -gt 0 ]; then
  echo "== importing ${#pypi_args[@]} release(s) from PyPI"
  "$GPUSTACK" catalog import pypi "${pypi_args[@]}" --date "$today" --out "$out/overlay" | tee "$out/import-pypi.txt"
fi
if [ "${#manifests[@]}" -gt 0 ]; then
  echo "== importing ${#manifests[@]} manifest(s)"
  "$GPUSTACK" catalog import redist "${manifests[@]}" --date "$today" --out "$out/overlay" | tee "$out/import-redist.txt"
fi

echo "== catalog diff (stock -> stock + $out/overlay)"
: >"$out/catalog.diff"
for family in cuda cudnn nccl torch vllm deepspeed extra; do
  "$GPUSTACK" catalog show "$family" >"$out/before.txt"
  "$GPUSTACK" catalog show "$family" --catalog "$out/overlay" >"$out/after.txt"
  diff -u --label "catalog $family" --label "catalog $family + overlay" "$out/before.txt" "$out/after.txt" >>"$out/catalog.diff" || true
done
rm -f "$out/before.txt" "$out/after.txt"
cat "$out/catalog.diff"
echo "== review $out/catalog.diff and $out/overlay/*.toml; nothing under catalog/ was changed"
