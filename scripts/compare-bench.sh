#!/usr/bin/env bash
# Two versions of agentd measured in one run on one machine (issue 41):
# figures from different runs or machines do not compare (one binary
# measured 2.4x apart on two machines of one kind), figures from one run do.
#
#   scripts/compare-bench.sh [REF] [OUTDIR]
#
# REF (default: the newest v* tag, else HEAD~1) is built from git, the
# working tree as it is beside it. Then:
#   - start-up: the current binary's `bench --scenarios startup --against`
#     starts both, interleaved start by start with a minimal Go program and
#     HTTP server (RUNS starts each, default 15; medians);
#   - SCENARIOS (default none; e.g. "turn,concurrency"): ROUNDS rounds
#     (default 3) of `agentd bench --scenarios SCENARIOS`, old and new
#     alternating, each round's figures printed; extra bench flags in
#     BENCH_FLAGS (e.g. "--sessions 100 --turns-each 2").
# Everything goes to OUTDIR (default a new directory under $TMPDIR or
# /tmp); summary.txt holds what BENCHMARKS.md quotes.
set -euo pipefail
cd "$(dirname "$0")/.."
ref=${1:-$(git describe --tags --abbrev=0 --match 'v*' 2>/dev/null || echo HEAD~1)}
out=${2:-${TMPDIR:-/tmp}/agentd-compare-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out"
old=$out/agentd-old new=$out/agentd-new

rev=$(git rev-parse --short "$ref^{commit}")
echo "== building $ref ($rev) and the working tree ($(git rev-parse --short HEAD)$(git diff --quiet || echo '+changes'))"
src=$(mktemp -d)
trap 'rm -rf "$src"' EXIT
git archive "$rev" | tar -x -C "$src"
(cd "$src" && go build -o "$old" ./cmd/agentd)
go build -o "$new" ./cmd/agentd

{
  echo "machine: $(nproc) cores, $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo), $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo)"
  echo "old: $ref ($rev)   new: $(git rev-parse --short HEAD)"
  echo
  echo "== start-up, interleaved start by start (medians of ${RUNS:-15})"
} | tee "$out/summary.txt"
"$new" bench --scenarios startup --against "old=$old" --startup-runs "${RUNS:-15}" \
  --json "$out/startup.json" 2>/dev/null | tee "$out/startup.txt" |
  grep -E 'commit ceiling|Go HTTP|Go program|CPU loop|^startup' | tee -a "$out/summary.txt"

if [ -n "${SCENARIOS:-}" ]; then
  for round in $(seq "${ROUNDS:-3}"); do
    for side in old new; do
      bin=$old
      [ $side = new ] && bin=$new
      echo "== round $round, $side: bench --scenarios $SCENARIOS ${BENCH_FLAGS:-}" | tee -a "$out/summary.txt"
      # shellcheck disable=SC2086 # BENCH_FLAGS is a list of flags
      "$bin" bench --scenarios "$SCENARIOS" ${BENCH_FLAGS:-} --json "$out/$side-$round.json" 2>/dev/null |
        tee "$out/$side-$round.txt" |
        grep -E 'commit ceiling|CPU loop|turns_per_s|server_cpu_ms_per_turn|ms p50|reads_per_s|commits_per_s|errors|RSS MiB' |
        tee -a "$out/summary.txt"
    done
  done
fi
echo "== written to $out"
