#!/usr/bin/env bash
# Regenerates the fuzzers' working corpus outside the repository, and minimizes it back
# into the committed seed corpus (issue 36).
#
#   scripts/fuzz-corpus.sh [--seconds N] [--no-fuzz] [TARGET]...
#
# For each target (default: catalog spec lock render):
# 1. copies the committed seeds (fuzz/corpus/<target>/) into the working corpus,
#    $GPUSTACK_FUZZ_WORK/<target> (default: ~/.cache/gpustack-fuzz), which is never committed;
# 2. fuzzes for N seconds (default 600; --no-fuzz skips this and only minimizes), growing
#    the working corpus; a crash leaves its input in fuzz/artifacts/<target>/: copy it to
#    fuzz/regressions/<target>/ with the fix;
# 3. replaces fuzz/corpus/<target>/ by a set cover of the working corpus (libFuzzer's
#    -set_cover_merge=1 -use_counters=0: the smallest subset, found greedily, that keeps
#    every covered edge; hit counts are not features, so loops of other lengths do not
#    each keep an input), which tests/fuzz_corpus.rs replays on stable.
#
# Needs a nightly toolchain and cargo-fuzz (`cargo install cargo-fuzz`). Builds without a
# sanitizer (-s none), optimized: the targets check properties, not memory errors.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=600
fuzz=true
targets=()
while [ "$#" -gt 0 ]; do
  case "$1" in
    --seconds) seconds=$2; shift 2 ;;
    --no-fuzz) fuzz=false; shift ;;
    -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
    *) targets+=("$1"); shift ;;
  esac
done
[ "${#targets[@]}" -gt 0 ] || targets=(catalog spec lock render)
work=${GPUSTACK_FUZZ_WORK:-$HOME/.cache/gpustack-fuzz}

for t in "${targets[@]}"; do
  max_len=65536
  [ "$t" = catalog ] && max_len=4096
  mkdir -p "$work/$t"
  cp -n fuzz/corpus/"$t"/* "$work/$t"/ 2>/dev/null || true
  if [ "$fuzz" = true ]; then
    echo "== $t: fuzzing for ${seconds}s into $work/$t"
    (cd fuzz && cargo +nightly fuzz run -s none -O "$t" "$work/$t" -- \
      -max_total_time="$seconds" -max_len="$max_len")
  fi
  echo "== $t: minimizing $(find "$work/$t" -type f | wc -l) inputs into fuzz/corpus/$t"
  fresh=$(mktemp -d)
  (cd fuzz && cargo +nightly fuzz run -s none -O "$t" "$fresh" "$work/$t" -- \
    -set_cover_merge=1 -use_counters=0)
  rm -rf fuzz/corpus/"$t"
  mkdir -p fuzz/corpus/"$t"
  cp "$fresh"/* fuzz/corpus/"$t"/
  rm -rf "$fresh"
  echo "== $t: $(find fuzz/corpus/"$t" -type f | wc -l) seeds ($(du -sh fuzz/corpus/"$t" | cut -f1))"
done
