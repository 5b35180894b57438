#!/bin/bash
# refenv/trunkserver.sh: a private Zed neutron-server with the trunk service plugin, for the
# trunk RPC tests (internal/neutron, tag trunkserver). The shared server on :9696 has
# service_plugins empty and is left alone: this one has its own database (neutron_trunk),
# RabbitMQ vhost (neutron-trunk), API port (127.0.0.1:9698), lock and log directories, so it
# needs no e2e lock.
#   refenv/trunkserver.sh start | stop | env
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
PORT=${TRUNK_API_PORT:-9698}
DB=neutron_trunk
VHOST=neutron-trunk
DIR=/etc/neutron/refenv-trunk
RUN=/run/ovsagent-refenv-trunk
LOG=/var/log/neutron
RMQ=${RMQ:-rabbitmqctl}
log() { echo "[trunkserver] $*"; }
api_code() { curl -s -o /dev/null -w '%{http_code}' -H 'X-Project-Id: demo' "http://127.0.0.1:$PORT/v2.0/networks" || true; }
alive() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null && tr '\0' ' ' < "/proc/$(cat "$1")/cmdline" | grep -q -- "$DIR/"; }

start() {
  mkdir -p "$DIR" "$RUN" /var/lib/neutron-trunk/lock "$LOG"
  if [ "$(api_code)" = 200 ]; then log "answers on 127.0.0.1:$PORT: left as it is"; return 0; fi
  if ! alive "$RUN/server.pid"; then
    mysql -e "CREATE DATABASE IF NOT EXISTS $DB;
      CREATE USER IF NOT EXISTS 'neutron'@'localhost' IDENTIFIED BY 'neutronpass';
      CREATE USER IF NOT EXISTS 'neutron'@'127.0.0.1' IDENTIFIED BY 'neutronpass';
      GRANT ALL ON $DB.* TO 'neutron'@'localhost'; GRANT ALL ON $DB.* TO 'neutron'@'127.0.0.1'; FLUSH PRIVILEGES;"
    $RMQ -q add_vhost "$VHOST" >/dev/null 2>&1 || true
    $RMQ -q set_permissions -p "$VHOST" guest '.*' '.*' '.*' >/dev/null
    install -m 644 "$HERE"/etc/neutron/ml2_conf.ini "$HERE"/etc/neutron/policy-none.yaml "$DIR/"
    sed -e "s|^bind_port = .*|bind_port = $PORT|" \
        -e "s|^service_plugins *=.*|service_plugins = trunk|" \
        -e "s|^transport_url = .*|transport_url = rabbit://guest:guest@127.0.0.1:5672/$VHOST|" \
        -e "s|^connection = .*|connection = mysql+pymysql://neutron:neutronpass@127.0.0.1/$DB|" \
        -e "s|^state_path = .*|state_path = /var/lib/neutron-trunk|" \
        -e "s|^lock_path = .*|lock_path = /var/lib/neutron-trunk/lock|" \
        -e "s|/etc/neutron/refenv/policy-none.yaml|$DIR/policy-none.yaml|" \
        "$HERE/etc/neutron/neutron.conf" > "$DIR/neutron.conf"
    grep -q '^service_plugins = trunk$' "$DIR/neutron.conf"
    log "neutron-db-manage upgrade heads ($DB)"
    neutron-db-manage --config-file "$DIR/neutron.conf" --config-file "$DIR/ml2_conf.ini" upgrade heads \
      > "$LOG/refenv-trunk-db-manage.log" 2>&1 || { tail -20 "$LOG/refenv-trunk-db-manage.log"; exit 1; }
    (cd /var/lib/neutron-trunk && exec setsid nohup /usr/bin/neutron-server --config-file "$DIR/neutron.conf" \
      --config-file "$DIR/ml2_conf.ini" --log-file "$LOG/refenv-trunk-server.log") \
      > "$LOG/refenv-trunk-server.stdout" 2>&1 < /dev/null &
    echo $! > "$RUN/server.pid"
    log "neutron-server pid $(cat "$RUN/server.pid")"
  fi
  for _ in $(seq 1 120); do [ "$(api_code)" = 200 ] && break; sleep 1; done
  [ "$(api_code)" = 200 ] || { log "API does not answer on 127.0.0.1:$PORT ($LOG/refenv-trunk-server.log)"; exit 1; }
  log "answers on http://127.0.0.1:$PORT/v2.0 (vhost $VHOST, database $DB, service_plugins trunk)"
}

stop() {
  if alive "$RUN/server.pid"; then
    local p; p=$(cat "$RUN/server.pid")
    log "stopping pid $p"; kill -TERM "$p"
    for _ in $(seq 1 30); do kill -0 "$p" 2>/dev/null || break; sleep 0.5; done
    kill -0 "$p" 2>/dev/null && kill -KILL "$p"
  fi
  rm -f "$RUN/server.pid"
}

case "${1:-start}" in
  start) start ;;
  stop) stop ;;
  env) printf 'TRUNK_API=http://127.0.0.1:%s/v2.0\nTRUNK_TRANSPORT_URL=rabbit://guest:guest@127.0.0.1:5672/%s\n' "$PORT" "$VHOST" ;;
  *) echo "usage: $0 start|stop|env" >&2; exit 2 ;;
esac
