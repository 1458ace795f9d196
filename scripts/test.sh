#!/usr/bin/env bash
# scripts/test.sh: the one test command (`make test`).
#
# On a fresh Debian machine it installs redis-server if missing, starts redis-server
# and a throwaway PostgreSQL cluster on free loopback ports, exports REDIS_ADDR,
# DATABASE_URL and REDIS_SERVER, checks what the core packages and the root go.mod
# depend on, then in every module of the repository (the root, otelfloodgate,
# bulkhead/bulkheadpgx, bulkhead/bulkheadgrpc, internal/pgtest, examples: each directory with a go.mod but
# bench/) runs go vet, staticcheck (installed with go install if missing) and go test
# -race -shuffle=on (each test binary at most TEST_TIMEOUT, 10m by default: a hang
# fails with a goroutine dump), then the allocation tests without -race and one
# iteration of every benchmark, then vets and smoke-runs bench/ (one iteration each,
# and one short fault scenario of bench/faults) and runs the tests of bench/report
# and of bench/ but the report sections.
# go.work is ignored (GOWORK=off): each module is tested as its go.mod says, as a
# user gets it. Both servers are stopped and their data removed on every exit path:
# success, failure or Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '==> %s\n' "$*" >&2; }
export GOWORK=off
die() { printf 'test.sh: %s\n' "$*" >&2; exit 1; }

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else return 1; fi; }

# --- dependencies ---------------------------------------------------------------
if ! command -v redis-server >/dev/null 2>&1; then
  log "installing redis-server (Debian package)"
  export DEBIAN_FRONTEND=noninteractive
  as_root apt-get install -y -q redis-server >/dev/null 2>&1 ||
    { as_root apt-get update -q >/dev/null && as_root apt-get install -y -q redis-server >/dev/null; } ||
    die "cannot install redis-server"
  # The package starts a system instance on :6379; tests never use it.
  as_root systemctl stop redis-server >/dev/null 2>&1 || as_root service redis-server stop >/dev/null 2>&1 || true
fi
REDIS_SERVER=$(command -v redis-server)
STATICCHECK_VERSION=v0.8.2
if ! command -v staticcheck >/dev/null 2>&1; then
  log "installing staticcheck $STATICCHECK_VERSION (go install)"
  GOBIN=$(go env GOBIN); GOBIN=${GOBIN:-$(go env GOPATH)/bin}
  go install "honnef.co/go/tools/cmd/staticcheck@$STATICCHECK_VERSION" || die "cannot install staticcheck"
  export PATH="$GOBIN:$PATH"
fi
PGBIN=${PGBIN:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)}
[ -x "$PGBIN/initdb" ] || die "PostgreSQL server binaries not found (set PGBIN)"

# --- servers --------------------------------------------------------------------
WORK=$(mktemp -d /tmp/floodgate-test.XXXXXX)
REDIS_PID=""
PG_STARTED=""
CHILD=""
# descendants PID: every process below PID, so that an interrupted go test's own
# redis-server children (test servers it had no chance to stop) go too.
descendants() { local c; for c in $(pgrep -P "$1" 2>/dev/null); do echo "$c"; descendants "$c"; done; }
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if [ -n "$CHILD" ] && kill -0 "$CHILD" 2>/dev/null; then
    local tree; tree="$CHILD $(descendants "$CHILD")"
    kill -CONT $tree 2>/dev/null || true
    kill -TERM $tree 2>/dev/null || true
    sleep 1
    kill -KILL $tree 2>/dev/null || true
  fi
  if [ -n "$REDIS_PID" ]; then kill -CONT "$REDIS_PID" 2>/dev/null || true; kill "$REDIS_PID" 2>/dev/null || true; wait "$REDIS_PID" 2>/dev/null || true; fi
  if [ -n "$PG_STARTED" ]; then run_pg "$PGBIN/pg_ctl" -D "$WORK/pg" -m immediate -w stop >/dev/null 2>&1 || true; fi
  rm -rf "$WORK"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# run CMD...: runs a step in the background and waits for it, so that a signal
# interrupts the wait and the cleanup runs at once (bash defers traps while a
# foreground child runs).
run() { "$@" & CHILD=$!; local rc=0; wait "$CHILD" || rc=$?; CHILD=""; return "$rc"; }

free_port() {
  # Ask the kernel for a free port; fall back to probing when python3 is absent.
  if command -v python3 >/dev/null 2>&1; then
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
    return
  fi
  local p
  while :; do
    p=$(( (RANDOM % 20000) + 20000 ))
    (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return; }
  done
}

# PostgreSQL refuses to run as root: run it as the postgres user when we are root.
if [ "$(id -u)" = 0 ]; then
  id postgres >/dev/null 2>&1 || die "user postgres missing"
  run_pg() { runuser -u postgres -- "$@"; }
  chown postgres "$WORK"
else
  run_pg() { "$@"; }
fi

REDIS_PORT=$(free_port)
log "starting redis-server on 127.0.0.1:$REDIS_PORT"
"$REDIS_SERVER" --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no \
  --dir "$WORK" --logfile "$WORK/redis.log" &
REDIS_PID=$!

PG_PORT=$(free_port)
log "starting PostgreSQL on 127.0.0.1:$PG_PORT"
run_pg "$PGBIN/initdb" -D "$WORK/pg" -U postgres -A trust --no-sync -E UTF8 >"$WORK/initdb.log" 2>&1 ||
  { cat "$WORK/initdb.log" >&2; die "initdb failed"; }
PG_STARTED=1
run_pg "$PGBIN/pg_ctl" -D "$WORK/pg" -l "$WORK/pg.log" -w -t 60 \
  -o "-p $PG_PORT -c listen_addresses=127.0.0.1 -k $WORK -c fsync=off -c max_connections=200" start >/dev/null ||
  { cat "$WORK/pg.log" >&2; die "PostgreSQL did not start"; }

for _ in $(seq 100); do
  redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1 && break
  sleep 0.1
done
redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1 || { cat "$WORK/redis.log" >&2; die "redis-server did not start"; }

export REDIS_ADDR="127.0.0.1:$REDIS_PORT"
export DATABASE_URL="postgres://postgres@127.0.0.1:$PG_PORT/postgres?sslmode=disable"
export REDIS_SERVER
# Under make test a missing server is a failure, never a skip.
export FLOODGATE_REQUIRE_SERVERS=1

# --- checks ---------------------------------------------------------------------
log "gofmt"
unformatted=$(gofmt -l $(git ls-files --cached --others --exclude-standard '*.go'))
[ -z "$unformatted" ] || die "gofmt would change: $unformatted"

log "semaphore and shaper import only the standard library and internal packages (DESIGN.md)"
mod=$(go list -m)
nonstd=$(go list -deps -f '{{if not .Standard}}{{.ImportPath}}{{end}}' ./semaphore ./shaper |
  grep -v -e "^$mod/semaphore\$" -e "^$mod/shaper\$" -e "^$mod/internal/" || true)
[ -z "$nonstd" ] || die "semaphore/shaper depend on: $nonstd"

log "semaphore, shaper, breaker, bulkhead, adaptive and backoff link no Redis client, pgx, OpenTelemetry or gRPC"
leaked=$(go list -deps ./semaphore ./shaper ./breaker ./bulkhead ./adaptive ./backoff |
  grep -e '^github.com/redis/' -e '^github.com/jackc/' -e '^go.opentelemetry.io/' -e '^google.golang.org/grpc' || true)
[ -z "$leaked" ] || die "semaphore/shaper/breaker/bulkhead/adaptive/backoff depend on: $leaked"

log "the root module's graph has no pgx, OpenTelemetry, Prometheus or gRPC (they are otelfloodgate's, bulkheadpgx's and bulkheadgrpc's)"
leaked=$(go list -m all | grep -e '^github.com/jackc/' -e '^go.opentelemetry.io/' -e '^github.com/prometheus/' -e '^google.golang.org/grpc' || true)
[ -z "$leaked" ] || die "the root go.mod brings in: $leaked"

# Every module but bench/ (benchmarks against peer libraries, smoke-run at the
# end), the root first. A module of its own is outside ./... of any other.
MODULES=$(git ls-files --cached --others --exclude-standard 'go.mod' '*/go.mod' |
  xargs -n 1 dirname | grep -v '^bench$' | sort -u)
# inmod DIR CMD...: CMD in module DIR.
inmod() { local d=$1; shift; (cd "$d" && "$@"); }

for m in $MODULES; do
  log "go vet ./... ($m)"
  run inmod "$m" go vet ./...
  log "staticcheck ./... ($m)"
  run inmod "$m" staticcheck ./...
done

# Each test binary gets TEST_TIMEOUT (go test's -timeout is per binary): a
# test that hangs, in its body or in a cleanup, makes its binary panic with a
# dump of every goroutine and fail, well inside CI's 90 minutes (the whole
# suite takes 4 to 8; the slowest binary, distsem under -race, 2 to 4).
# go test -json through internal/testreport prints what go test prints, and
# also the messages of a test that was still running when its binary timed
# out (go test alone loses them: they are printed when the test ends).
TEST_TIMEOUT=${TEST_TIMEOUT:-10m}
go build -o "$WORK/testreport" ./internal/testreport
gotest() { go test -json "$@" 2>&1 | "$WORK/testreport"; } # go test's status (pipefail)

for m in $MODULES; do
  log "go test -race -shuffle=on ./... ($m; at most $TEST_TIMEOUT per test binary)"
  run inmod "$m" gotest -race -shuffle=on -timeout "$TEST_TIMEOUT" ${GOTESTFLAGS:-} ./...
done

# The allocation tests are built without -race only (//go:build !race): the
# race detector allocates on its own and makes sync.Pool drop items. So is the
# adaptive gate's simulator, which runs minutes of fake time (real minutes
# under the race detector).
for m in $MODULES; do
  log "allocation budgets and the adaptive simulator, without -race ($m)"
  run inmod "$m" gotest -count=1 -timeout "$TEST_TIMEOUT" -run 'Allocs|Allocat|Simulator' ./...
done

for m in $MODULES; do
  log "benchmarks, one iteration ($m)"
  run inmod "$m" go test -timeout "$TEST_TIMEOUT" -run='^$' -bench=. -benchtime=1x ./... >"$WORK/bench-mod.log" 2>&1 ||
    { cat "$WORK/bench-mod.log" >&2; die "benchmarks of $m failed"; }
done

if [ -f bench/go.mod ]; then
  log "bench/: go vet and one iteration of every benchmark"
  run bash -c 'cd bench && go vet ./... && go test -timeout "$1" -run="^$" -bench=. -benchtime=1x ./...' bash "$TEST_TIMEOUT" >"$WORK/bench.log" 2>&1 ||
    { cat "$WORK/bench.log" >&2; die "bench/ failed"; }
  log "bench/faults and bench/internal: their tests, one short fault scenario end to end among them (TestFaultsQuick, about 15 s)"
  run bash -c 'cd bench && go test -count=1 -timeout "$1" ./faults ./internal/...' bash "$TEST_TIMEOUT" >"$WORK/bench.log" 2>&1 ||
    { cat "$WORK/bench.log" >&2; die "bench/faults failed"; }
  # The report's own tests, and bench/'s tests but the four that write report
  # sections (run by make bench: minutes each), among them the check that the
  # floor scripts make the commands of distsem's fast paths.
  log "bench/report and bench/'s tests (not the report sections)"
  run bash -c 'cd bench && go test -count=1 -timeout "$1" ./report && go test -count=1 -timeout "$1" -skip "^(TestAdaptiveSim|TestAdaptiveFleetReport|TestShedSim|TestBackoffReport)$" .' bash "$TEST_TIMEOUT" >"$WORK/bench.log" 2>&1 ||
    { cat "$WORK/bench.log" >&2; die "bench/ tests failed"; }
fi
log "all passed"
