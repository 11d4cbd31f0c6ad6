#!/usr/bin/env bash
# The `make demo` walk-through: a local control plane (kwok simulates the
# node), restart-controller running against it, and a sample app whose
# config changes. Usage: hack/demo.sh DEMO_DIR   (make demo builds bin/ first)
#
# Needs only Go and bash: the cluster binaries (kubectl included) are built by
# hack/build-cluster-bins.sh, and HTTP checks use bash's /dev/tcp.
set -euo pipefail

if [ $# -ne 1 ]; then
  echo "usage: $0 DEMO_DIR" >&2
  exit 2
fi
mkdir -p "$1"
DEMO_DIR=$(cd "$1" && pwd)
cd "$(dirname "$0")/.."
ROOT=$(pwd)

CLUSTER_DIR="$DEMO_DIR/cluster"
KUBECONFIG_FILE="$CLUSTER_DIR/kubeconfig"
CONTROLLER="$ROOT/bin/restart-controller"
CONTROLLER_LOG="$DEMO_DIR/controller.log"
CONTROLLER_PID="$DEMO_DIR/controller.pid"
CONFIG="$ROOT/examples/config.yaml"
NS=demo
controller_started=0

# ---- helpers ---------------------------------------------------------------

if [ -t 1 ]; then bold=$'\e[1m'; green=$'\e[32m'; red=$'\e[31m'; reset=$'\e[0m'; else bold=; green=; red=; reset=; fi
step() { printf '\n%s==> %s%s\n' "$bold" "$*" "$reset"; }
ok() { printf '%s    ✓ %s%s\n' "$green" "$*" "$reset"; }
say() { printf '    %s\n' "$*"; }
fail() {
  printf '%s    ✗ %s%s\n' "$red" "$*" "$reset" >&2
  if [ "$controller_started" = 1 ] && [ -f "$CONTROLLER_LOG" ]; then
    echo "--- last lines of $CONTROLLER_LOG ---" >&2
    tail -n 20 "$CONTROLLER_LOG" >&2 || true
  fi
  exit 1
}
k() { "$KUBECTL" --kubeconfig "$KUBECONFIG_FILE" "$@"; }
indent() { sed 's/^/    /'; }

# http_get HOST PORT PATH: print the status code of a GET (000 when nothing answers).
http_get() (
  code=000
  if exec 3<>"/dev/tcp/$1/$2"; then
    printf 'GET %s HTTP/1.0\r\nHost: %s\r\n\r\n' "$3" "$1" >&3 || true
    if IFS=' ' read -r -t 5 _ line _ <&3; then code=$line; fi
  fi
  echo "$code"
) 2>/dev/null

# wait_until SECONDS WHAT COMMAND...: poll COMMAND once a second until it
# succeeds; fail with WHAT once SECONDS have passed.
wait_until() {
  local secs=$1 what=$2
  shift 2
  local deadline=$((SECONDS + secs))
  until "$@"; do
    if [ "$SECONDS" -ge "$deadline" ]; then fail "timed out after ${secs}s waiting for $what"; fi
    sleep 1
  done
}

# controller_running: the pid file names a live restart-controller process.
controller_running() {
  local pid
  [ -f "$CONTROLLER_PID" ] || return 1
  pid=$(cat "$CONTROLLER_PID")
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 1
  # On Linux, make sure the pid was not reused by something else.
  if [ -r "/proc/$pid/cmdline" ]; then tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q restart-controller || return 1; fi
}

stop_controller() {
  if controller_running; then
    local pid
    pid=$(cat "$CONTROLLER_PID")
    say "stopping the controller left from an earlier run (pid $pid)"
    kill "$pid" 2>/dev/null || true
    local deadline=$((SECONDS + 15))
    while kill -0 "$pid" 2>/dev/null; do
      if [ "$SECONDS" -ge "$deadline" ]; then kill -9 "$pid" 2>/dev/null || true; break; fi
      sleep 0.2
    done
  fi
  rm -f "$CONTROLLER_PID"
}

# Restarts are counted as pod-template changes (ReplicaSets), never as
# generations: a Deployment's generation also rises on annotation-only writes.
replicasets() { k get replicasets -n "$NS" -l app=web -o name | wc -l | tr -d ' '; }
pod_names() { k get pods -n "$NS" -l app=web -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}' | sort; }
restart_lines() { grep -c 'restarted.*deployments\.apps/demo/web\|deployments\.apps/demo/web.*restarted' "$CONTROLLER_LOG" || true; }
applied_checksums() {
  k get deployment web -n "$NS" -o jsonpath='{.metadata.annotations.com\.xing\.deployment-restart\.applied-config-checksums}'
}
has_applied_checksums() { [ -n "$(applied_checksums)" ]; }

# ---- (a) binaries ----------------------------------------------------------

step "Building the local cluster binaries (cached after the first run; the first can take several minutes)"
bins=$(hack/build-cluster-bins.sh)
KUBECTL="$bins/kubectl"
[ -x "$KUBECTL" ] || fail "no kubectl in $bins"
[ -x "$CONTROLLER" ] || fail "$CONTROLLER is missing; run 'make demo', which builds it first"
ok "binaries in $bins"

# ---- (b) cluster -----------------------------------------------------------

stop_controller

step "Starting a local Kubernetes cluster (etcd, kube-apiserver, controller-manager, scheduler, kwok) in $CLUSTER_DIR"
reused=0
if [ -f "$CLUSTER_DIR/pids" ]; then
  if go run ./hack/localcluster status --dir "$CLUSTER_DIR" >/dev/null 2>&1; then
    reused=1
    ok "a demo cluster is already running there: reusing it"
  else
    say "stopping what is left of an earlier demo cluster"
    go run ./hack/localcluster down --dir "$CLUSTER_DIR" | indent
  fi
fi
if [ "$reused" = 0 ]; then
  # localcluster bounds each of its own waits (etcd, API server, node, service account).
  go run ./hack/localcluster up --dir "$CLUSTER_DIR" 2>&1 >/dev/null | indent || fail "the local cluster did not start; logs in $CLUSTER_DIR/logs"
  ok "cluster is up; kubeconfig $KUBECONFIG_FILE"
fi
k get nodes -o wide | indent

if k get namespace "$NS" >/dev/null 2>&1; then
  say "deleting namespace $NS from the earlier run, so the demo starts from scratch"
  k delete namespace "$NS" --wait=true --timeout=120s >/dev/null || fail "namespace $NS was not deleted in time"
fi

# ---- (c) controller --------------------------------------------------------

step "Starting restart-controller in the background (log: $CONTROLLER_LOG)"
port=10254
while [ "$(http_get 127.0.0.1 "$port" /healthz)" != 000 ]; do
  port=$((port + 1))
  [ "$port" -lt 10300 ] || fail "no free port between 10254 and 10299 for the metrics endpoint"
done
METRICS="127.0.0.1:$port"
: >"$CONTROLLER_LOG"
nohup "$CONTROLLER" --kubeconfig "$KUBECONFIG_FILE" --config "$CONFIG" --metrics-address "$METRICS" \
  </dev/null >>"$CONTROLLER_LOG" 2>&1 &
echo $! >"$CONTROLLER_PID"
controller_started=1
ready() {
  controller_running || fail "the controller exited during start-up"
  [ "$(http_get 127.0.0.1 "$port" /readyz)" = 200 ]
}
wait_until 60 "the controller's /readyz on $METRICS" ready
ok "controller running (pid $(cat "$CONTROLLER_PID")), ready on http://$METRICS/readyz"
grace=$(sed -n 's/^restartGracePeriod:[[:space:]]*\([0-9][0-9]*\)[[:space:]]*\(#.*\)\{0,1\}$/\1/p' "$CONFIG")
grace=${grace:-5}
say "grace period after a config change: ${grace}s (restartGracePeriod in examples/config.yaml)"

# ---- (d) the sample app ----------------------------------------------------

step "Deploying the sample app from examples/demo/: Deployment web (3 replicas) reads ConfigMap greeting's key 'message' and Secret api-token"
k apply -f examples/demo/ | indent
k rollout status deployment/web -n "$NS" --timeout=180s | indent || fail "deployment web did not roll out"
wait_until 60 "the controller to record web's applied checksums" has_applied_checksums
ok "the controller recorded the checksums of the data web's pods started with:"
say "com.xing.deployment-restart.applied-config-checksums: $(applied_checksums)"
rs0=$(replicasets)
pods0=$(pod_names)
say "ReplicaSets: $rs0; pods: $(echo "$pods0" | tr '\n' ' ')"

# ---- (e) a change nobody reads ---------------------------------------------

step "Changing only the key 'unused' of ConfigMap greeting, which web's pods do not read"
k patch configmap greeting -n "$NS" --type merge -p "{\"data\":{\"unused\":\"changed at $(date +%T)\"}}" | indent
wait_s=$((grace + 5))
say "waiting ${wait_s}s (grace period + 5s)..."
sleep "$wait_s"
rs1=$(replicasets)
[ "$rs1" = "$rs0" ] || fail "web was restarted (ReplicaSets $rs0 -> $rs1) although it does not read 'unused'"
[ "$(restart_lines)" = 0 ] || fail "the controller logged a restart of web"
ok "nothing restarted: web still has $rs1 ReplicaSet(s)"

# ---- (f) a change web reads ------------------------------------------------

step "Changing the key 'message', which web's pods read through env MESSAGE"
k patch configmap greeting -n "$NS" --type merge -p "{\"data\":{\"message\":\"Hello again, $(date +%T)\"}}" | indent
restarted() { [ "$(restart_lines)" -gt 0 ]; }
wait_until $((grace + 60)) "the controller to restart web" restarted
ok "the controller restarted web after the grace period:"
grep 'restarted.*deployments\.apps/demo/web\|deployments\.apps/demo/web.*restarted' "$CONTROLLER_LOG" | indent
k rollout status deployment/web -n "$NS" --timeout=180s | indent || fail "deployment web did not roll out"
rs2=$(replicasets)
[ "$rs2" = "$((rs0 + 1))" ] || fail "web has $rs2 ReplicaSets, want $((rs0 + 1)): one restart"
old_pods_gone() { [ -z "$(comm -12 <(echo "$pods0") <(pod_names))" ]; }
wait_until 60 "the old pods to go away" old_pods_gone
ok "rolled out: one new ReplicaSet ($rs0 -> $rs2), every pod replaced"
k get replicasets -n "$NS" -o wide | indent
k get pods -n "$NS" -o wide | indent
say "new checksums: $(applied_checksums)"

# ---- (g) what next ---------------------------------------------------------

step "The demo is still running. Look around:"
cat <<EOF
    export KUBECONFIG=$KUBECONFIG_FILE
    $KUBECTL get deploy,rs,pods -n $NS
    $KUBECTL edit configmap greeting -n $NS     # change 'message' again
    tail -f $CONTROLLER_LOG
    curl -s http://$METRICS/metrics | grep restart

Stop everything (cluster and controller) with: make demo-down
EOF
