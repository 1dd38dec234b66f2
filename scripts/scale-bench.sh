#!/usr/bin/env bash
# The throughput and many-session figures of BENCHMARKS.md, in one run, on
# the machine it runs on (issue 29): the same commands on two cores
# (taskset) and on all of them, so the two columns come from one machine.
#
#   scripts/scale-bench.sh [OUTDIR]     (default: a new directory under $TMPDIR or /tmp)
#
# AGENTD (default: ./agentd, else built from this checkout) is the binary;
# with AGENTD_TEST_POSTGRES set (what scripts/postgres.sh start prints), the
# PostgreSQL rows run too. QUICK=1 runs only the 1,000-session rows. Each
# row's report goes to OUTDIR/NAME.txt and OUTDIR/NAME.json; summary.txt
# collects the lines BENCHMARKS.md quotes.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-${TMPDIR:-/tmp}/agentd-scale-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out"
bin=${AGENTD:-./agentd}
if [ ! -x "$bin" ]; then
  go build -o "$out/agentd" ./cmd/agentd
  bin=$out/agentd
fi
bin=$(realpath "$bin")
cores=$(nproc)
echo "machine: $cores cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo)" | tee "$out/summary.txt"

# row NAME CPUS ARGS...: one agentd bench run, on the given CPUs (all: every core).
row() {
  local name=$1 cpus=$2
  shift 2
  local pin=()
  if [ "$cpus" != all ]; then pin=(taskset -c "$cpus"); fi
  echo "== $name" | tee -a "$out/summary.txt"
  "${pin[@]}" "$bin" bench --json "$out/$name.json" "$@" 2>/dev/null | tee "$out/$name.txt" |
    grep -E 'turns_per_s |server_cpu_ms_per_turn|committer_busy_pct|turn_3_steps|turn_overhead|rss_kib_per_session|RSS MiB|errors|commits_per_s' |
    tee -a "$out/summary.txt"
}

for cpus in 0,1 all; do
  tag=${cpus/0,1/2cores}
  row "concurrency-1000-$tag" "$cpus" --scenarios ceiling,concurrency --sessions 1000 --turns-each 2
  row "concurrency-async-1000-$tag" "$cpus" --scenarios concurrency-async --sessions 1000 --turns-each 2
  [ "${QUICK:-}" = 1 ] && continue
  row "blocking-4000-$tag" "$cpus" --scenarios concurrency --sessions 4000 --turns-each 1
  row "paced-async-10000-$tag" "$cpus" --scenarios paced-async --sessions 10000 --turns-each 1 --think 3s --provider-tls
  row "paced-10000-$tag" "$cpus" --scenarios paced --sessions 10000 --turns-each 1 --think 3s
done

if [ -n "${AGENTD_TEST_POSTGRES:-}" ]; then
  for n in 1 3; do
    row "postgres-$n-nodes" all --database "$AGENTD_TEST_POSTGRES" --nodes "$n" --scenarios concurrency --sessions 1000 --turns-each 1
  done
  AGENTD_TEST_POSTGRES=$AGENTD_TEST_POSTGRES go test -run '^$' -bench CommitCeiling -benchtime 2s ./internal/store/postgres |
    grep Benchmark | tee -a "$out/summary.txt"
fi

# The committer's CPU per turn: its share of a 10 s CPU profile in the
# middle of a 1,000-session run, over the turns in that window. Its
# inverse is the most turns/s one SQLite writer serves, cores aside.
echo "== committer" | tee -a "$out/summary.txt"
dir=$(mktemp -d)
"$bin" fakellm --port 17171 >/dev/null 2>&1 &
fake=$!
cat >"$dir/agentd.json" <<EOF
{"model":"fake/fake-model","provider":{"fake":{"npm":"@ai-sdk/openai-compatible","options":{"baseURL":"http://127.0.0.1:17171/v1"}}}}
EOF
# In an empty directory, as the bench's own server is: the turns' tool
# lists the working directory.
(cd "$dir" && exec "$bin" serve --port 17272 --pprof --access-log=false --config "$dir/agentd.json" --db "$dir/a.db" >"$dir/serve.log" 2>&1) &
srv=$!
trap 'kill $srv $fake 2>/dev/null || true; rm -rf "$dir"' EXIT
until curl -sf -o /dev/null http://127.0.0.1:17272/global/health; do sleep 0.1; done
(sleep 4 && curl -s -o "$out/committer.cpu" 'http://127.0.0.1:17272/debug/pprof/profile?seconds=10') &
prof=$!
"$bin" bench --url http://127.0.0.1:17272 --pid "$srv" --scenarios concurrency --sessions 1000 --turns-each 6 2>/dev/null >"$out/committer-run.txt"
wait "$prof" || true
tps=$(awk '/turns_per_s / {print $3}' "$out/committer-run.txt")
# pprof prints 850ms or 1.25s.
secs=$(go tool pprof -top -cum "$bin" "$out/committer.cpu" 2>/dev/null |
  awk '/sqlite.\(\*Store\).committer$/ {v=$4; if (v ~ /ms$/) {sub(/ms$/, "", v); v/=1000} else sub(/s$/, "", v); print v}')
echo "turns/s $tps, committer ${secs}s of a 10 s window: $(awk -v s="$secs" -v t="$tps" 'BEGIN {printf "%.2f ms a turn", 1000*s/(10*t)}')" | tee -a "$out/summary.txt"
