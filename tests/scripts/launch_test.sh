#!/usr/bin/env bash
# `meshplan run` started by the launchers users have, for real (CTest; CPU ranks over Gloo):
#   torchrun-static  the torch wheel's torchrun, --rdzv-backend static (MASTER_ADDR/PORT)
#   torchrun-c10d    the same with --rdzv-backend c10d
#   slurm            two processes started as srun would (SLURM_PROCID, SLURM_NTASKS,
#                    SLURM_LOCALID, MASTER_ADDR, MASTER_PORT; rank 0 hosts the store)
# each training a tiny 2-rank plan, then `meshplan compare` reading its measured.json; and
#   wrong-store      a rank pointed at a closed port and at a TCP listener that answers
#                    garbage must fail (exit 1) saying which, and the time it really waited.
#
#   launch_test.sh MODE MESHPLAN PYTHON    (PYTHON: the torch wheel's venv python; its bin/ has torchrun)
set -euo pipefail
mode="$1"; meshplan="$2"; python="$3"
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/refuses.sh"  # fail
work="$(mktemp -d)"
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
cd "$work"
free_port() { "$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
cat > plan.yaml <<'YAML'
model: tiny-llama
cluster: 2xa40-pcie
training: {global_batch: 4, seq_len: 32, precision: fp32, steps: 3}
plan: {dp: 2, zero: 1}
YAML
run_args=(run plan.yaml --steps 3 --warmup 1 --device cpu --comm-timeout 60 --out measured.json)

# The run trained both ranks, and compare reads its result (exit 0: within the tolerance, 1:
# outside it; both print the comparison).
trained_and_compared() {
  [ -f measured.json ] || fail "$mode: no measured.json"
  "$python" - <<'PY' || fail "$mode: measured.json is not a 2-rank, 3-step run"
import json
m = json.load(open("measured.json"))
assert m["steps"] == 3 and m["environment"]["world_size"] == 2 and len(m["ranks"]) == 2, m
PY
  local rc=0
  "$meshplan" compare plan.yaml measured.json --format json > compare.json || rc=$?
  [ $rc -le 1 ] || fail "$mode: compare exited $rc: $(cat compare.json)"
  grep -q '"error_pct"' compare.json || fail "$mode: compare printed no comparison: $(cat compare.json)"
  echo "$mode: trained 2 ranks and compared (compare exit $rc)"
}

torchrun_with() {  # torchrun_with RDZV-ARGS...
  local rc=0
  "$(dirname "$python")/torchrun" --nproc-per-node 2 "$@" --no-python "$meshplan" "${run_args[@]}" \
    > run.log 2>&1 || rc=$?
  [ $rc -eq 0 ] || fail "$mode: torchrun exited $rc: $(tail -30 run.log)"
}

case "$mode" in
  torchrun-static)
    torchrun_with --rdzv-backend static --master-addr 127.0.0.1 --master-port "$(free_port)"
    trained_and_compared ;;
  torchrun-c10d)
    torchrun_with --rdzv-backend c10d --rdzv-endpoint "127.0.0.1:$(free_port)" --rdzv-id "launch-test-$$"
    trained_and_compared ;;
  slurm)
    port="$(free_port)"
    for r in 0 1; do
      SLURM_PROCID=$r SLURM_NTASKS=2 SLURM_LOCALID=$r SLURM_NODEID=0 SLURM_JOB_ID=$$ \
        MASTER_ADDR=127.0.0.1 MASTER_PORT=$port OMP_NUM_THREADS=1 \
        "$meshplan" "${run_args[@]}" > "rank$r.log" 2>&1 &
    done
    for r in 0 1; do
      wait -n || fail "$mode: a rank failed: $(tail -20 rank0.log rank1.log)"
    done
    trained_and_compared ;;
  wrong-store)
    # rank_fails_at PORT WANT: rank 1 of 2 (a store client) against PORT fails with WANT, and
    # the time it says it waited is no more than the time it ran.
    rank_fails_at() {
      local port="$1" want="$2" rc=0 start end said
      start="$(date +%s.%N)"
      RANK=1 WORLD_SIZE=2 LOCAL_RANK=1 MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" \
        "$meshplan" run plan.yaml --device cpu --comm-timeout 3 --out measured.json > wrong.log 2>&1 || rc=$?
      end="$(date +%s.%N)"
      [ $rc -eq 1 ] || fail "port $port: exit $rc, want 1: $(cat wrong.log)"
      grep -qF -- "$want" wrong.log || fail "port $port: want '$want' in: $(cat wrong.log)"
      said="$(sed -n 's/.* after \([0-9.]*\) s of the 3 s allowed.*/\1/p' wrong.log | head -1)"
      [ -n "$said" ] || fail "port $port: no 'after X s of the 3 s allowed' in: $(cat wrong.log)"
      awk -v s="$said" -v a="$start" -v b="$end" 'BEGIN { exit !(s <= b - a + 0.05) }' ||
        fail "port $port: says it waited $said s, but ran $(awk -v a="$start" -v b="$end" 'BEGIN { print b - a }') s"
      echo "port $port: $(grep -m1 'rendezvous store' wrong.log)"
    }
    rank_fails_at "$(free_port)" "nothing listens there (connection refused)"
    garbage_port="$(free_port)"
    "$python" - "$garbage_port" <<'PY' &
import socket, sys, threading
server = socket.socket()
server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
server.bind(("127.0.0.1", int(sys.argv[1])))
server.listen(16)
def answer(conn):
    try:
        while True:
            conn.sendall(b"HTTP/1.0 418 not a store\r\n" * 64)
            if not conn.recv(4096):
                break
    except OSError:
        pass
while True:
    conn, _ = server.accept()
    threading.Thread(target=answer, args=(conn,), daemon=True).start()
PY
    for _ in $(seq 50); do  # until it listens
      "$python" -c "import socket,sys; socket.create_connection(('127.0.0.1', $garbage_port), 1)" 2>/dev/null && break
      sleep 0.1
    done
    rank_fails_at "$garbage_port" "something listens there but does not answer as a c10d TCPStore" ;;
  *) fail "unknown mode '$mode' (torchrun-static | torchrun-c10d | slurm | wrong-store)" ;;
esac
