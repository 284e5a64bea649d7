#!/usr/bin/env bash
# The engine has no `unsafe`: fuzzing runs without AddressSanitizer (several times faster);
# panics, timeouts and memory blow-ups are what it looks for.
# Runs every fuzz target (or those named) for FUZZ_SECONDS each, one after another, on the
# corpora seeded by fuzz/seed.py under target/fuzz-corpus/. Crashes land in
# fuzz/artifacts/<target>/ and stop the run with a non-zero exit.
# Usage: fuzz/run.sh [TARGET...]   (from the repository root; `make fuzz` calls it)
set -euo pipefail
export CARGO_BUILD_JOBS=${CARGO_BUILD_JOBS:-2}
SECONDS_PER=${FUZZ_SECONDS:-60}
TARGETS=("$@")
if [ ${#TARGETS[@]} -eq 0 ]; then
  TARGETS=(seclang urlencoded json multipart xml transforms libinjection transaction header_blocks replay_pairs quiet_again)
fi
# -timeout: an input taking over 10 s is a finding (a denial of service), not a slow run.
# -rss_limit_mb: the transaction target holds the full CRS (~300 MB); more is a finding.
for t in "${TARGETS[@]}"; do
  mkdir -p "target/fuzz-corpus/$t"
  echo "== fuzz $t for ${SECONDS_PER}s"
  cargo +nightly fuzz run --sanitizer none --fuzz-dir fuzz --target-dir target/fuzz "$t" "target/fuzz-corpus/$t" -- \
    -max_total_time="$SECONDS_PER" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 2>&1 \
    | tee "target/fuzz-$t.log" | grep -E '^(==|#[0-9]+ +DONE|stat::number_of_executed_units|stat::peak_rss_mb|SUMMARY|artifact_prefix|Test unit written)' || true
  # (slow-unit-* files are reports, not findings; a timeout-* is.)
  if grep -qE 'Test unit written to .*/(crash|timeout|oom|leak)-|SUMMARY: libFuzzer' "target/fuzz-$t.log"; then
    echo "fuzz $t: crash, see target/fuzz-$t.log and fuzz/artifacts/$t/" >&2
    exit 1
  fi
done
