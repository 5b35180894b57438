#!/bin/bash
# A three-node RabbitMQ cluster beside the system broker, and a second Zed neutron-server on it.
#   rmqcluster.sh up        nodes ovsa1..3@localhost (AMQP 127.0.0.1:5701-5703, distribution
#                           25701-25703, private cookie, management off) clustered, and
#                           neutron-server on 127.0.0.1:9697 (own database neutron_rmqc) with
#                           rabbit_quorum_queue = true and transport_url listing the three nodes
#   rmqcluster.sh nodes     only the nodes (start the missing ones, join them)
#   rmqcluster.sh down      stop the server and the nodes (data kept: the next up is fast)
#   rmqcluster.sh purge     down, then remove the data directory and drop neutron_rmqc
#   rmqcluster.sh status    cluster status and pids
#   rmqcluster.sh running   exit 0 when the three nodes and the server run (their pid files checked)
#   rmqcluster.sh ctl N ARGS...   rabbitmqctl against node N (1..3) with the cluster's cookie
#   rmqcluster.sh env       the variables a test needs (transport URL, API URL, ctl wrapper)
# Idempotent: what runs is left running. The system node (rabbit@localhost on 5672) is never
# touched: every node here has its own env file, config, plugins file, data, logs and cookie
# (HOME), and shares only epmd. Every daemon runs in its own session (setsid), its pid recorded;
# stopping checks /proc/PID/cmdline first.
set -euo pipefail
export PATH=/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin
# Descriptors a caller left open (flock's) must not reach the daemons (see setup.sh).
# (No redirection on the loop: bash would save stderr on a descriptor the loop then closes.)
for _f in $(ls /proc/$$/fd); do if [ "$_f" -gt 2 ] && [ "$_f" -lt 255 ]; then eval "exec $_f>&-"; fi; done
HERE=$(cd "$(dirname "$0")" && pwd)
BASE=${RMQC_BASE:-/var/lib/ovsagent-rmqcluster}
PORT0=${RMQC_PORT0:-5700}     # node N listens on PORT0+N, distribution on PORT0+N+20000
API_PORT=${RMQC_API_PORT:-9697}
DB=neutron_rmqc
NODES="1 2 3"
RMQ_BIN=/usr/lib/rabbitmq/bin
export ERL_EPMD_ADDRESS=127.0.0.1
log() { echo "[rmqcluster $(date +%T)] $*" >&2; }

node_name() { echo "ovsa$1@localhost"; }
node_dir() { echo "$BASE/node$1"; }
# ctl N ARGS: rabbitmqctl with the cluster's cookie (HOME holds .erlang.cookie)
ctl() { local n=$1; shift; HOME=$BASE/home RABBITMQ_CONF_ENV_FILE=$BASE/home/rabbitmq-env.conf timeout 60 $RMQ_BIN/rabbitmqctl -n "$(node_name "$n")" "$@"; }
# pid_ok PIDFILE WORD: the pid in the file runs and its command line contains WORD
pid_ok() {
  [ -s "$1" ] || return 1
  local p; p=$(cat "$1")
  [ -r /proc/$p/cmdline ] && tr '\0' ' ' < /proc/$p/cmdline | grep -qF -- "$2"
}
# beam_ok N: node N's recorded beam pid is a beam.smp with our cookie home whose working
# directory is node N's (the node name is not on its command line)
beam_ok() {
  local d; d=$(node_dir "$1")
  pid_ok "$d/beam.pid" "-home $BASE/home" && [ "$(readlink "/proc/$(cat "$d/beam.pid")/cwd")" = "$d" ]
}
node_up() { beam_ok "$1" && ctl "$1" -q status >/dev/null 2>&1; }

prepare() {
  mkdir -p "$BASE/home"
  if [ ! -s "$BASE/home/.erlang.cookie" ]; then
    (umask 077; head -c 30 /dev/urandom | base64 | tr -dc A-Za-z0-9 | head -c 20 > "$BASE/home/.erlang.cookie")
  fi
  chmod 400 "$BASE/home/.erlang.cookie"
  : > "$BASE/home/rabbitmq-env.conf"   # not /etc/rabbitmq/rabbitmq-env.conf (the system node's)
  local n d p
  for n in $NODES; do
    d=$(node_dir "$n"); p=$((PORT0 + n))
    mkdir -p "$d/mnesia" "$d/log"
    cat > "$d/rabbitmq.conf" <<EOF
# written by refenv/rmqcluster.sh: node $(node_name "$n")
listeners.tcp.local = 127.0.0.1:$p
cluster_partition_handling = pause_minority
EOF
    echo '[].' > "$d/enabled_plugins"
  done
}

start_node() {
  local n=$1 d p
  d=$(node_dir "$n"); p=$((PORT0 + n))
  rm -f "$d/beam.pid"
  log "starting $(node_name "$n") on 127.0.0.1:$p"
  ( cd "$d"
    env HOME=$BASE/home RABBITMQ_CONF_ENV_FILE=$BASE/home/rabbitmq-env.conf \
      RABBITMQ_NODENAME="$(node_name "$n")" RABBITMQ_NODE_IP_ADDRESS=127.0.0.1 RABBITMQ_NODE_PORT=$p \
      RABBITMQ_DIST_PORT=$((p + 20000)) RABBITMQ_CONFIG_FILE="$d/rabbitmq.conf" \
      RABBITMQ_ENABLED_PLUGINS_FILE="$d/enabled_plugins" RABBITMQ_MNESIA_BASE="$d/mnesia" \
      RABBITMQ_LOG_BASE="$d/log" RABBITMQ_PID_FILE="$d/beam.pid" \
      RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS='-kernel inet_dist_use_interface {127,0,0,1}' \
      setsid nohup $RMQ_BIN/rabbitmq-server > "$d/log/stdout" 2>&1 < /dev/null &
    echo $! > "$d/wrapper.pid" )
}

wait_node() {
  local n=$1 i
  for i in $(seq 1 90); do beam_ok "$n" && ctl "$n" -q await_startup >/dev/null 2>&1 && return 0; sleep 1; done
  log "node $(node_name "$n") did not start: $(tail -5 "$(node_dir "$n")/log/stdout")"; return 1
}

running_nodes() { ctl 1 -q cluster_status --formatter json 2>/dev/null | python3 -c 'import json,sys; print(" ".join(sorted(json.load(sys.stdin)["running_nodes"])))' 2>/dev/null || true; }

join() { # node N joins node 1
  local n=$1
  log "$(node_name "$n") joins $(node_name 1)"
  ctl "$n" -q stop_app; ctl "$n" -q reset; ctl "$n" -q join_cluster "$(node_name 1)"; ctl "$n" -q start_app
}

nodes_up() {
  prepare
  local n want="ovsa1@localhost ovsa2@localhost ovsa3@localhost" started=""
  # the common case, one call: all three run and are clustered
  if beam_ok 1 && beam_ok 2 && beam_ok 3 && [ "$(running_nodes)" = "$want" ]; then
    log "cluster runs: $want"; return 0
  fi
  for n in $NODES; do beam_ok "$n" || { start_node "$n"; started="$started $n"; }; done
  for n in $started; do wait_node "$n"; done
  for n in 2 3; do
    ctl 1 -q cluster_status --formatter json | grep -q "\"$(node_name "$n")\"" || join "$n"
  done
  for n in $(seq 1 30); do [ "$(running_nodes)" = "$want" ] && break; sleep 1; done
  [ "$(running_nodes)" = "$want" ] || { log "cluster runs [$(running_nodes)], want [$want]"; return 1; }
  log "cluster up: $want, AMQP 127.0.0.1:$((PORT0+1))-$((PORT0+3))"
}

transport_url() {
  local n u=""
  for n in $NODES; do u="$u${u:+,}guest:guest@127.0.0.1:$((PORT0 + n))"; done
  echo "rabbit://$u/"
}

api_code() { curl -s -o /dev/null -w '%{http_code}' -H 'X-Project-Id: demo' "http://127.0.0.1:$API_PORT/v2.0/networks" || true; }

server_up() {
  local c="$BASE/neutron" pf="$BASE/neutron/server.pid"
  mkdir -p "$c/lock" "$c/state" "$BASE/log"
  if pid_ok "$pf" neutron-server && [ "$(api_code)" = 200 ]; then log "neutron-server :$API_PORT runs (pid $(cat "$pf"))"; return 0; fi
  [ -f /etc/neutron/refenv/neutron.conf ] || { log "no /etc/neutron/refenv/neutron.conf: run AGENT=none refenv/setup.sh first"; return 1; }
  # the refenv server's configuration, with this cluster, its own database, port and state
  sed -e "s|^bind_port = .*|bind_port = $API_PORT|" \
      -e "s|^transport_url = .*|transport_url = $(transport_url)|" \
      -e "s|^state_path = .*|state_path = $c/state|" \
      -e "s|^connection = mysql+pymysql://neutron:neutronpass@127.0.0.1/neutron$|connection = mysql+pymysql://neutron:neutronpass@127.0.0.1/$DB|" \
      -e "s|^lock_path = .*|lock_path = $c/lock|" \
      -e "/^\[oslo_messaging_rabbit\]/a rabbit_quorum_queue = true" \
      /etc/neutron/refenv/neutron.conf > "$c/neutron.conf"
  grep -q "/$DB\$" "$c/neutron.conf" || { log "database line not rewritten in $c/neutron.conf"; return 1; }
  mysql -e "CREATE DATABASE IF NOT EXISTS $DB; GRANT ALL ON $DB.* TO 'neutron'@'localhost'; GRANT ALL ON $DB.* TO 'neutron'@'127.0.0.1'; FLUSH PRIVILEGES;"
  if ! mysql -N -e "SELECT 1 FROM $DB.alembic_version LIMIT 1" >/dev/null 2>&1 || [ ! -e "$c/db.done" ]; then
    log "neutron-db-manage upgrade heads ($DB)"
    neutron-db-manage --config-file "$c/neutron.conf" --config-file /etc/neutron/refenv/ml2_conf.ini upgrade heads > "$BASE/log/db-manage.log" 2>&1
    touch "$c/db.done"
  fi
  log "starting neutron-server on 127.0.0.1:$API_PORT"
  ( cd "$c"
    setsid nohup /usr/bin/neutron-server --config-file "$c/neutron.conf" --config-file /etc/neutron/refenv/ml2_conf.ini \
      --log-file "$BASE/log/neutron-server.log" > "$BASE/log/neutron-server.stdout" 2>&1 < /dev/null &
    echo $! > "$pf" )
  local i
  for i in $(seq 1 120); do [ "$(api_code)" = 200 ] && break; sleep 1; done
  [ "$(api_code)" = 200 ] || { log "neutron-server :$API_PORT not answering: $(tail -5 "$BASE/log/neutron-server.log")"; return 1; }
  log "neutron-server :$API_PORT answers (pid $(cat "$pf"))"
}

# stop_pid PIDFILE WORD: TERM the process (and its session) if it is still ours, KILL after 30 s
stop_pid() {
  local pf=$1 word=$2 p i
  pid_ok "$pf" "$word" || { rm -f "$pf"; return 0; }
  p=$(cat "$pf"); log "stopping $word pid $p"
  kill -TERM "$p" 2>/dev/null || true
  for i in $(seq 1 60); do kill -0 "$p" 2>/dev/null || break; sleep 0.5; done
  pid_ok "$pf" "$word" && { log "$word pid $p still alive: SIGKILL"; kill -KILL "$p"; }
  rm -f "$pf"
}

server_down() {
  local pf="$BASE/neutron/server.pid" p c
  # its API/RPC workers are children in the same session: stop them with it
  if pid_ok "$pf" neutron-server; then
    p=$(cat "$pf")
    for c in $(pgrep -s "$p" 2>/dev/null || true); do
      [ "$c" = "$p" ] && continue
      tr '\0' ' ' < /proc/$c/cmdline 2>/dev/null | grep -qF neutron-server && echo "$c"
    done > "$BASE/neutron/workers.pids"
    stop_pid "$pf" neutron-server
    for c in $(cat "$BASE/neutron/workers.pids"); do echo "$c" > "$BASE/neutron/w.pid"; stop_pid "$BASE/neutron/w.pid" neutron-server; done
  fi
}

node_down() {
  local n=$1 d; d=$(node_dir "$n")
  if beam_ok "$n"; then
    ctl "$n" -q stop "$d/beam.pid" >/dev/null 2>&1 || true
    beam_ok "$n" && stop_pid "$d/beam.pid" "-home $BASE/home"
  fi
  rm -f "$d/beam.pid"
  pid_ok "$d/wrapper.pid" rabbitmq-server && stop_pid "$d/wrapper.pid" rabbitmq-server
  rm -f "$d/wrapper.pid"
}

case "${1:-status}" in
  up) nodes_up; server_up ;;
  nodes) nodes_up ;;
  down) server_down; for n in 3 2 1; do node_down "$n"; done ;;
  purge)
    server_down; for n in 3 2 1; do node_down "$n"; done
    mysql -e "DROP DATABASE IF EXISTS $DB"
    case "$BASE" in /var/lib/ovsagent-rmqcluster|/tmp/*) rm -rf "$BASE" ;; *) log "not removing $BASE (unexpected path)";; esac ;;
  status)
    for n in $NODES; do d=$(node_dir "$n"); echo "$(node_name "$n") port $((PORT0+n)) beam $(cat "$d/beam.pid" 2>/dev/null || echo -) up=$(node_up "$n" && echo yes || echo no)"; done
    echo "neutron-server :$API_PORT pid $(cat "$BASE/neutron/server.pid" 2>/dev/null || echo -) api=$(api_code)"
    for n in $NODES; do node_up "$n" && { ctl "$n" -q cluster_status; break; }; done ;;
  running) beam_ok 1 && beam_ok 2 && beam_ok 3 && pid_ok "$BASE/neutron/server.pid" neutron-server ;;
  ctl) shift; ctl "$@" ;;
  env)
    echo "RMQC_TRANSPORT_URL=$(transport_url)"
    echo "RMQC_NEUTRON_URL=http://127.0.0.1:$API_PORT/v2.0"
    echo "RMQC_BASE=$BASE" ;;
  *) echo "usage: $0 up|nodes|down|purge|status|running|ctl N ARGS|env" >&2; exit 2 ;;
esac
