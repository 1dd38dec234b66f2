#!/usr/bin/env bash
# Three PostgreSQL nodes against one, in one run (issue 41): 1,000 sessions
# of 3-step tool turns, rows alternating between node counts (and between
# two binaries when AGENTD_PREV names an earlier one), each on a fresh
# schema, with what explains the figure measured beside it:
#
#   - lock waits: connections of the database waiting on a lock, sampled
#     from pg_stat_activity every 0.2 s (all, and those of the event log);
#   - commits per turn (transaction ids assigned: transactions that wrote) and PostgreSQL's commit ceiling
#     (BenchmarkCommitCeiling, 16 callers, at the start and the end): the
#     design's ceiling in turns/s is their quotient;
#   - CPU per turn: the bench process tree (load client, nodes, fakellm)
#     plus PostgreSQL's server processes.
#
#   scripts/cluster-bench.sh [OUTDIR]
#
# AGENTD_TEST_POSTGRES (required) is a server of the bench's own: rows run
# on it one at a time and each creates and drops a schema. AGENTD (default
# ./agentd, else built from this checkout) is the binary; AGENTD_PREV an
# earlier one to alternate with. ROUNDS (default 2), SESSIONS (1000) and
# TURNS (2 per session) size the run.
#
# PIN=1 gives every process its own cores (taskset), on a machine that has
# them (at least 10 cores): PostgreSQL (a cluster the script starts with
# scripts/postgres.sh, PGPORT default 20785), each of three nodes, and the
# load client with fakellm get a fifth of the cores each, so that three
# nodes have three times the CPU of one. Without PIN the bench starts the
# nodes itself and they share every core with PostgreSQL and the client.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-${TMPDIR:-/tmp}/agentd-cluster-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out"
bin=${AGENTD:-./agentd}
if [ ! -x "$bin" ]; then
  go build -o "$out/agentd" ./cmd/agentd
  bin=$out/agentd
fi
bin=$(realpath "$bin")
bins=(cur)
declare -A path=([cur]=$bin)
if [ -n "${AGENTD_PREV:-}" ]; then
  path[prev]=$(realpath "$AGENTD_PREV")
  bins=(prev cur)
fi
rounds=${ROUNDS:-2} sessions=${SESSIONS:-1000} turns=${TURNS:-2}
cores=$(nproc)
summary=$out/summary.txt
echo "machine: $cores cores; $sessions sessions x $turns turns; binaries: ${bins[*]}" | tee "$summary"

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

# cpus I: the I-th fifth of the cores (PIN=1), as a taskset list.
cpus() {
  local q=$((cores / 5))
  echo "$(($1 * q))-$(($1 * q + q - 1))"
}
pin() { if [ "${PIN:-}" = 1 ]; then taskset -c "$(cpus "$1")" "${@:2}"; else "${@:2}"; fi; }

base=${AGENTD_TEST_POSTGRES:-}
if [ "${PIN:-}" = 1 ]; then
  if [ "$cores" -lt 10 ]; then
    echo "PIN=1 needs at least 10 cores (this machine has $cores)" >&2
    exit 1
  fi
  pgdir=$out/pg
  base=$(pin 0 scripts/postgres.sh start "$pgdir" "${PGPORT:-20785}")
  trap 'cleanup; scripts/postgres.sh stop "$pgdir" >/dev/null 2>&1 || true' EXIT
  "$bin" fakellm --port 17171 >/dev/null 2>&1 &
  pids+=($!)
  taskset -cp "$(cpus 4)" "${pids[-1]}" >/dev/null
  cat >"$out/agentd.json" <<EOF
{"model":"fake/fake-model","provider":{"fake":{"npm":"@ai-sdk/openai-compatible","options":{"baseURL":"http://127.0.0.1:17171/v1"}}}}
EOF
fi
: "${base:?set AGENTD_TEST_POSTGRES to a PostgreSQL server for the bench alone (scripts/postgres.sh start DIR PORT)}"
export PGOPTIONS='-c client_min_messages=warning'
sql() { psql "$base" -XAtqc "$1"; }
# xids: transaction ids assigned so far, i.e. transactions that wrote.
xids() { sql 'SELECT pg_snapshot_xmax(pg_current_snapshot())'; }
datadir=$(sql 'SHOW data_directory')

# pg_cpu: CPU seconds of the PostgreSQL server so far: the postmaster, the
# backends it has reaped and those alive.
pg_cpu() {
  local pm tck
  pm=$(head -1 "$datadir/postmaster.pid")
  tck=$(getconf CLK_TCK)
  { awk '{print $14 + $15 + $16 + $17}' "/proc/$pm/stat"
    for c in $(pgrep -P "$pm"); do awk '{print $14 + $15}' "/proc/$c/stat" 2>/dev/null || true; done
  } | awk -v t="$tck" '{s += $1} END {printf "%.2f", s / t}'
}

ceiling() {
  AGENTD_TEST_POSTGRES=$base go test -run '^$' -bench 'CommitCeiling/parallel' -benchtime 2s ./internal/store/postgres |
    awk '/Benchmark/ {printf "%.0f", 1e9 / $3}'
}

# sampler URL FILE: every 0.2 s, the connections of the database waiting
# on a lock, those of them on the event log, those active, and what the
# event log's waiters wait for (tuple, transactionid, extend, ...).
sampler() {
  while :; do
    psql "$1" -XAtqc "SELECT count(*) FILTER (WHERE wait_event_type = 'Lock'),
      count(*) FILTER (WHERE wait_event_type = 'Lock' AND query ~* 'event_head|event_inbox|events|agentd_sequence_events'),
      count(*) FILTER (WHERE state = 'active'),
      string_agg(wait_event, ',') FILTER (WHERE wait_event_type = 'Lock' AND query ~* 'event_head|event_inbox|events|agentd_sequence_events')
      FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()" >>"$2" 2>/dev/null || true
    sleep 0.2
  done
}

# bench VARIANT NODES URL NAME: one bench run of the concurrency scenario.
bench() {
  local b=${path[$1]} n=$2 url=$3 name=$4
  if [ "${PIN:-}" != 1 ]; then
    "$b" bench --json "$out/$name.json" --database "$url" --nodes "$n" \
      --scenarios concurrency --sessions "$sessions" --turns-each "$turns" 2>/dev/null
    return
  fi
  local urls=() nodes=() i port
  for i in $(seq 0 $((n - 1))); do
    port=$((17300 + i))
    (cd "$out" && exec taskset -c "$(cpus $((i + 1)))" "$b" serve --port "$port" --db "$url" --node "node$i" \
      --config "$out/agentd.json" --log-level error --access-log=false >>"$out/serve.log" 2>&1) &
    nodes+=($!)
    urls+=("http://127.0.0.1:$port")
  done
  for u in "${urls[@]}"; do until curl -sf -o /dev/null "$u/global/health"; do sleep 0.1; done; done
  taskset -c "$(cpus 4)" "$b" bench --json "$out/$name.json" --url "$(IFS=,; echo "${urls[*]}")" \
    --scenarios concurrency --sessions "$sessions" --turns-each "$turns" 2>/dev/null
  kill "${nodes[@]}" 2>/dev/null || true
  wait "${nodes[@]}" 2>/dev/null || true
}

# row VARIANT NODES: one measured row on a fresh schema.
row() {
  local v=$1 n=$2 name schema url sp t0 pg0 x0 rc=0
  name="$v-$n-nodes-$(date +%H%M%S)"
  schema=b_$(date +%s%N)
  sql "CREATE SCHEMA $schema"
  url="$base$(case $base in *\?*) echo '&' ;; *) echo '?' ;; esac)search_path=$schema"
  sampler "$base" "$out/$name.locks" &
  sp=$!
  pg0=$(pg_cpu)
  x0=$(xids)
  t0=$(date +%s.%N)
  TIMEFORMAT='%U %S'
  { time bench "$v" "$n" "$url" "$name" >"$out/$name.txt" || rc=$?; } 2>"$out/$name.time"
  kill "$sp" 2>/dev/null || true
  wait "$sp" 2>/dev/null || true
  local wall x1 pg1 tps nturns cpu
  wall=$(echo "$(date +%s.%N) - $t0" | bc)
  x1=$(xids)
  pg1=$(pg_cpu)
  sql "DROP SCHEMA $schema CASCADE" >/dev/null
  tps=$(awk '/turns_per_s / {print $3; exit}' "$out/$name.txt")
  nturns=$((sessions * turns))
  cpu=$(awk -v p="$(echo "$pg1 - $pg0" | bc)" -v n="$nturns" '{printf "%.2f", 1000 * ($1 + $2 + p) / n}' "$out/$name.time")
  awk -v name="$name" -v tps="${tps:-?}" -v rc="$rc" -v cpu="$cpu" -v c="$(echo "$x1 - $x0" | bc)" -v n="$nturns" -v pg="$(echo "$pg1 - $pg0" | bc)" -v wall="$wall" -F'|' '
    {l += $1; e += $2; a += $3; if ($2 > me) me = $2; k++}
    END {printf "%-26s turns/s %s  cpu ms/turn %s (postgres %.1f s of %.0f s)  commits/turn %.1f  lock waits mean %.2f (event log %.2f, max %d) of %.1f active  rc %s\n",
      name, tps, cpu, pg, wall, c / n, l / k, e / k, me, a / k, rc}' "$out/$name.locks" | tee -a "$summary"
}

c0=$(ceiling)
echo "commit ceiling (16 callers): $c0/s" | tee -a "$summary"
for r in $(seq 1 "$rounds"); do
  order=("${bins[@]}")
  if [ $((r % 2)) = 0 ]; then order=($(printf '%s\n' "${bins[@]}" | tac)); fi
  for v in "${order[@]}"; do
    if [ $((r % 2)) = 1 ]; then ns=(1 3); else ns=(3 1); fi
    for n in "${ns[@]}"; do row "$v" "$n"; done
  done
done
c1=$(ceiling)
echo "commit ceiling (16 callers): $c1/s" | tee -a "$summary"
