#!/bin/bash
# refenv release.sh — a newer neutron-server (RELEASE=2025.1 or 2026.2) from Debian packages in a
# debootstrap chroot, against the host's MariaDB and RabbitMQ. Sourced by setup.sh (release_setup);
# run directly:
#   RELEASE=2026.2 refenv/release.sh env     prints REFENV_* shell assignments (API port, vhost,
#                                            transport_url, database, chroot, version)
#   RELEASE=2026.2 refenv/release.sh stop    stops that release's daemons (by pid file)
#   RELEASE=2026.2 refenv/release.sh status  pid files, API answer, version
# MESSAGING=quorum or MESSAGING=classic selects a second server of the release with other
# [oslo_messaging_rabbit] options ($REFENV_MESSAGING, see messaging_vars), on its own API port,
# vhost, database, configuration directory, log names and pid directory: both can run at once.
# `MESSAGING=quorum release.sh agent` runs the reference agent against that server with its
# neutron.conf (its [oslo_messaging_rabbit]) as host refhv-<release>-quorum: a mixed broker with
# ovs-agent configured alike (test/e2e TestMixedBrokerReference).
# Idempotent: the chroot is made once (/var/lib/ovsagent-refenv/<release>, ~5 min, ~900 MB) and
# marked ready; a later run with the server answering on its port changes nothing.
# Daemons are started with setsid, their pids recorded in /run/refenv/<release>/; never by name.

release_vars() {
  case "$RELEASE" in
    2025.1) SUITE=trixie; REFENV_API_PORT=9251 ;;
    2026.2) SUITE=sid; REFENV_API_PORT=9262 ;;
    *) echo "release.sh: RELEASE=$RELEASE is not a chroot release (2025.1, 2026.2)" >&2; return 2 ;;
  esac
  REFENV_CHROOT=/var/lib/ovsagent-refenv/$RELEASE
  REFENV_DB=neutron_${RELEASE//./_}
  REFENV_VHOST=neutron-$RELEASE
  REFENV_TRANSPORT_URL="rabbit://guest:guest@127.0.0.1:5672/$REFENV_VHOST"
  RRUN=/run/refenv/$RELEASE
  REFENV_NAME=refenv         # configuration directory /etc/neutron/<name> and log prefix in the chroot
  REFENV_MESSAGING=""
  messaging_vars || return 2
  REFENV_CONF=/etc/neutron/$REFENV_NAME
  # AGENT=python: the chroot's reference agent as its own host on a private OVS (see release_agent)
  REFENV_AGENT_HOST=refhv-${RELEASE//./-}${MESSAGING:+-$MESSAGING}   # oslo host: a numeric last label is refused
  REFENV_OVS_NS=refenv-$RELEASE${MESSAGING:+-$MESSAGING}
  REFENV_OVS_DIR=$RRUN/ovs
  MIRROR=${MIRROR:-http://deb.debian.org/debian}
  # what debootstrap puts in (uwsgi for 2026.2's API; the agent for AGENT=python later)
  INCLUDE=python3-neutron,neutron-common,python3-pymysql,neutron-openvswitch-agent,iproute2,procps,uwsgi-core,uwsgi-plugin-python3
}

# messaging_vars: MESSAGING=<variant> moves the server to a port, vhost, database and names of
# its own and sets REFENV_MESSAGING, its [oslo_messaging_rabbit] options as key=value,... (the e2e
# suite gives the same to ovs-agent: OVSAGENT_E2E_MESSAGING).
#   quorum   what kolla-ansible turns on (om_enable_rabbitmq_quorum_queues, ..._transient_quorum_queue,
#            ..._stream_fanout, om_enable_queue_manager); oslo refuses stream fanout without a
#            prefetch count > 0, so rabbit_qos_prefetch_count = 10
#   classic  the classic-queue options: amqp_durable_queues, amqp_auto_delete, rabbit_ha_queues
messaging_vars() {
  local off
  case "${MESSAGING:-}" in
    "") return 0 ;;
    quorum) off=1; REFENV_MESSAGING=rabbit_quorum_queue=true,rabbit_transient_quorum_queue=true,rabbit_stream_fanout=true,use_queue_manager=true,rabbit_qos_prefetch_count=10 ;;
    classic) off=2; REFENV_MESSAGING=amqp_durable_queues=true,amqp_auto_delete=true,rabbit_ha_queues=true ;;
    *) echo "release.sh: MESSAGING=$MESSAGING is not a messaging variant (quorum, classic)" >&2; return 2 ;;
  esac
  REFENV_API_PORT=$((REFENV_API_PORT + off))
  REFENV_DB=${REFENV_DB}_$MESSAGING
  REFENV_VHOST=$REFENV_VHOST-$MESSAGING
  REFENV_TRANSPORT_URL="rabbit://guest:guest@127.0.0.1:5672/$REFENV_VHOST"
  RRUN=$RRUN-$MESSAGING
  REFENV_NAME=refenv-$MESSAGING
}

rlog() { echo "[release $RELEASE${MESSAGING:+ $MESSAGING} $(date +%T)] $*"; }
ralive() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }
rapi_code() { curl -s -o /dev/null -w '%{http_code}' -H 'X-Project-Id: demo' "http://127.0.0.1:$REFENV_API_PORT/v2.0/networks" || true; }
release_version() { chroot "$REFENV_CHROOT" dpkg-query -W -f '${Version}' python3-neutron 2>/dev/null || echo unknown; }

# chroot_mounts: /proc (neutron reads it), /dev and /sys bound from the host, once.
chroot_mounts() {
  local d=$1
  mountpoint -q "$d/proc" || mount -t proc proc "$d/proc"
  mountpoint -q "$d/dev" || mount --bind /dev "$d/dev"
  mountpoint -q "$d/sys" || mount --bind /sys "$d/sys"
}
chroot_umounts() {
  local d=$1 m
  for m in sys dev proc; do mountpoint -q "$d/$m" && umount "$d/$m"; done
  return 0
}

# make_chroot: debootstrap (marker .refenv-debootstrapped), then finish what --include left
# unconfigured with one `apt-get -f install` (marker .refenv-ready).
make_chroot() {
  local tmp=$REFENV_CHROOT.tmp
  [ -e "$REFENV_CHROOT/.refenv-ready" ] && return 0
  mkdir -p "$(dirname "$REFENV_CHROOT")"
  if [ ! -e "$tmp/.refenv-debootstrapped" ]; then
    # --include leaves packages with virtual dependencies unconfigured (python3-grpcio in sid,
    # python3-pycparser in trixie): debootstrap then fails while configuring, with the base system
    # in place; apt-get -f install below finishes them (also after such a run was interrupted
    # here before the marker was written). Any other failure stops here.
    partial_ok() { grep -q "Failure while configuring" "$tmp.debootstrap.log" 2>/dev/null \
      && [ -x "$tmp/usr/bin/apt-get" ] && [ -s "$tmp/etc/apt/sources.list" ]; }
    if partial_ok; then
      rlog "a previous debootstrap left packages unconfigured: apt-get -f install finishes them"
    elif rlog "debootstrap $SUITE into $tmp (about 5 minutes; log $tmp.debootstrap.log)"; ! debootstrap --variant=minbase --include="$INCLUDE" "$SUITE" "$tmp" "$MIRROR" > "$tmp.debootstrap.log" 2>&1; then
      if partial_ok; then
        rlog "debootstrap left packages unconfigured ($(grep -o 'possibly the package [^ ]*' "$tmp.debootstrap.log" | tail -1)): apt-get -f install finishes them"
      else
        tail -20 "$tmp.debootstrap.log"; rlog "debootstrap failed (log $tmp.debootstrap.log)"; return 1
      fi
    fi
    touch "$tmp/.refenv-debootstrapped"
  fi
  # no service starts from maintainer scripts inside the chroot
  printf '#!/bin/sh\nexit 101\n' > "$tmp/usr/sbin/policy-rc.d"; chmod +x "$tmp/usr/sbin/policy-rc.d"
  # the mirror this machine reaches can serve a Release file past its Valid-Until (seen for sid:
  # "is expired (invalid since 28d)"): apt would refuse it; the packages are still signed
  echo 'Acquire::Check-Valid-Until "false";' > "$tmp/etc/apt/apt.conf.d/99refenv"
  chroot_mounts "$tmp"
  rlog "apt-get -f install inside the chroot"
  if ! chroot "$tmp" env DEBIAN_FRONTEND=noninteractive sh -c 'apt-get update -q && apt-get -f install -y -q' > "$tmp.apt.log" 2>&1; then
    tail -20 "$tmp.apt.log"; chroot_umounts "$tmp"; rlog "apt-get -f install failed (log $tmp.apt.log)"; return 1
  fi
  chroot_umounts "$tmp"
  touch "$tmp/.refenv-ready"
  mv "$tmp" "$REFENV_CHROOT"
  rlog "chroot ready: $REFENV_CHROOT (neutron $(release_version))"
}

# write_conf: refenv's Zed configuration with this release's port, database and vhost (and a
# messaging variant's options, lock directory and configuration directory).
write_conf() {
  local d=$REFENV_CHROOT$REFENV_CONF lock=/var/lib/neutron/lock
  [ "$REFENV_NAME" = refenv ] || lock=/var/lib/neutron/lock-$REFENV_NAME   # no lock shared with the other server
  mkdir -p "$d" "$REFENV_CHROOT$lock" "$REFENV_CHROOT/var/log/neutron"
  install -m 644 "$HERE"/etc/neutron/ml2_conf.ini "$d/"
  # noauth's admin context has no roles; the binding API wants the service role (policy-chroot.yaml)
  install -m 644 "$HERE"/etc/neutron/policy-chroot.yaml "$d/policy-none.yaml"
  sed -e "s|^bind_port = .*|bind_port = $REFENV_API_PORT|" \
      -e "s|^transport_url = .*|transport_url = $REFENV_TRANSPORT_URL|" \
      -e "s|^connection = .*|connection = mysql+pymysql://neutron:neutronpass@127.0.0.1/$REFENV_DB|" \
      -e "s|^lock_path = .*|lock_path = $lock|" \
      -e "s|/etc/neutron/refenv/|$REFENV_CONF/|" \
      "$HERE/etc/neutron/neutron.conf" > "$d/neutron.conf"
  # 2025.1's eventlet API worker, idle, misses the broker's heartbeats: the broker drops it and
  # the next publish waits ~60 s (docs/reference/releases.md).
  cat >> "$d/neutron.conf" <<EOF

# written by refenv/release.sh for $RELEASE
[oslo_messaging_rabbit]
heartbeat_timeout_threshold = 0
EOF
  [ -z "$REFENV_MESSAGING" ] || { echo "# MESSAGING=$MESSAGING"; tr ',' '\n' <<< "$REFENV_MESSAGING" | sed 's/=/ = /'; } >> "$d/neutron.conf"
  # 2026.2: the API runs under uwsgi (no neutron-server binary any more)
  cat > "$d/api-uwsgi.ini" <<EOF
[uwsgi]
plugins = python3
http-socket = 127.0.0.1:$REFENV_API_PORT
wsgi-file = /usr/lib/python3/dist-packages/neutron/wsgi/api.py
env = OS_NEUTRON_CONFIG_DIR=$REFENV_CONF
env = OS_NEUTRON_CONFIG_FILES=neutron.conf;ml2_conf.ini
master = true
processes = 1
threads = 1
lazy-apps = true
enable-threads = true
die-on-term = true
exit-on-reload = false
add-header = Connection: close
buffer-size = 65535
start-time = %t
EOF
}

# rstart NAME CMD...: setsid, in the chroot, pid recorded. The subshell execs setsid, which (not a
# group leader: no job control here) execs nohup, chroot, the daemon: $! is the daemon's pid.
rstart() {
  local name=$1; shift
  ralive "$RRUN/$name.pid" && return 0
  (cd / && exec setsid nohup chroot "$REFENV_CHROOT" "$@") \
      > "$REFENV_CHROOT/var/log/neutron/$REFENV_NAME-$name.stdout" 2>&1 < /dev/null &
  echo $! > "$RRUN/$name.pid"
  sleep 1
  rlog "$name pid $(cat "$RRUN/$name.pid"): $(tr '\0' ' ' < "/proc/$(cat "$RRUN/$name.pid")/cmdline" 2>/dev/null | cut -c1-80)"
}

release_start() {
  local NC="--config-file $REFENV_CONF/neutron.conf --config-file $REFENV_CONF/ml2_conf.ini" L=/var/log/neutron/$REFENV_NAME
  if [ "$RELEASE" = 2025.1 ]; then
    rstart server /usr/bin/neutron-server $NC --log-file $L-server.log
  else
    rstart rpc-server /usr/bin/neutron-rpc-server $NC --log-file $L-rpc-server.log
    rstart periodic-workers /usr/bin/neutron-periodic-workers $NC --log-file $L-periodic-workers.log
    rstart api /usr/bin/uwsgi --ini $REFENV_CONF/api-uwsgi.ini --logto $L-api.log
  fi
}

release_running() {
  local n
  for n in server rpc-server periodic-workers api; do ralive "$RRUN/$n.pid" && return 0; done
  return 1
}

release_setup() {
  release_vars
  mkdir -p "$RRUN"
  # a server without the QoS API runs a configuration from before qos: stopped, reconfigured below
  if [ "$(rapi_code)" = 200 ] && { [ "$(curl -s -o /dev/null -w '%{http_code}' -H 'X-Project-Id: demo' "http://127.0.0.1:$REFENV_API_PORT/v2.0/qos/policies" || true)" != 200 ] ||
       [ "$(curl -s -o /dev/null -w '%{http_code}' -H 'X-Project-Id: demo' "http://127.0.0.1:$REFENV_API_PORT/v2.0/trunks" || true)" != 200 ]; }; then
    rlog "neutron $RELEASE has no QoS or trunk API (configuration before the qos and trunk plugins): restarting it reconfigured"
    release_stop
  fi
  if [ "$(rapi_code)" = 200 ]; then
    rlog "neutron $RELEASE answers on 127.0.0.1:$REFENV_API_PORT: left as it is"
    return 0
  fi
  if release_running; then
    rlog "neutron $RELEASE daemons run (pids in $RRUN) but the API does not answer yet: waiting, not restarting"
  else
    make_chroot
    chroot_mounts "$REFENV_CHROOT"
    mysql -e "CREATE DATABASE IF NOT EXISTS $REFENV_DB;
      CREATE USER IF NOT EXISTS 'neutron'@'localhost' IDENTIFIED BY 'neutronpass';
      CREATE USER IF NOT EXISTS 'neutron'@'127.0.0.1' IDENTIFIED BY 'neutronpass';
      GRANT ALL ON $REFENV_DB.* TO 'neutron'@'localhost'; GRANT ALL ON $REFENV_DB.* TO 'neutron'@'127.0.0.1'; FLUSH PRIVILEGES;"
    $RMQ -q add_vhost "$REFENV_VHOST" >/dev/null 2>&1 || true   # exists already: fine
    $RMQ -q set_permissions -p "$REFENV_VHOST" guest '.*' '.*' '.*' >/dev/null
    write_conf
    rlog "neutron-db-manage upgrade heads ($REFENV_DB)"
    chroot "$REFENV_CHROOT" neutron-db-manage --config-file $REFENV_CONF/neutron.conf \
      --config-file $REFENV_CONF/ml2_conf.ini upgrade heads > "$REFENV_CHROOT/var/log/neutron/$REFENV_NAME-db-manage.log" 2>&1 \
      || { tail -20 "$REFENV_CHROOT/var/log/neutron/$REFENV_NAME-db-manage.log"; rlog "db-manage failed"; return 1; }
    release_start
  fi
  local i
  for i in $(seq 1 120); do [ "$(rapi_code)" = 200 ] && break; sleep 1; done
  [ "$(rapi_code)" = 200 ] || { rlog "API does not answer on 127.0.0.1:$REFENV_API_PORT (logs: $REFENV_CHROOT/var/log/neutron/)"; return 1; }
  rlog "neutron $(release_version) answers on http://127.0.0.1:$REFENV_API_PORT/v2.0 (vhost $REFENV_VHOST, database $REFENV_DB)"
}

# ------------------------------------------------------------------ AGENT=python
# The release's own neutron-openvswitch-agent (from the chroot) as host $REFENV_AGENT_HOST, on a
# private Open vSwitch: the host's ovsdb-server and ovs-vswitchd (the OVS ovs-agent runs against
# here), datapath netdev, in network namespace $REFENV_OVS_NS with their sockets in
# $REFENV_OVS_DIR. It touches neither the system OVS nor host hv1: no e2e lock is needed.
# - Every process of that hypervisor (both OVS daemons, the agent and what it spawns) runs in a
#   mount namespace of its own where $REFENV_OVS_DIR is bound on /run/openvswitch (the agent: on
#   the chroot's /run/openvswitch). The agent's configuration is refenv's Zed one (ovsdb_connection
#   unix:/var/run/openvswitch/db.sock), and the Manager it adds for that path (punix:) is the
#   private ovsdb-server's own socket, never the system one's.
# - The netns has its own loopback: the agent's OpenFlow controller (127.0.0.1:6633) is reached
#   by the private ovs-vswitchd only (no clash with Zed's agent), and RabbitMQ is relayed into it
#   as 127.0.0.1:5672 by two socat (host: unix socket -> 127.0.0.1:5672; netns: the reverse).
# - root_helper is rootwrap without sudo (everything runs as root inside the chroot).
hvexec() { # CMD...: in the netns, with the private OVS's directory on /run/openvswitch
  ip netns exec "$REFENV_OVS_NS" unshare -m --propagation private \
    sh -c 'mount --bind "$0" /run/openvswitch && exec "$@"' "$REFENV_OVS_DIR" "$@"
}
hvsctl() { ovs-vsctl --timeout=10 --db="unix:$REFENV_OVS_DIR/db.sock" "$@"; }

release_ovs_start() {
  local D=$REFENV_OVS_DIR
  mkdir -p "$D"
  ip netns list | grep -qx "$REFENV_OVS_NS\( .*\)\?" || { ip netns add "$REFENV_OVS_NS"; ip -n "$REFENV_OVS_NS" link set lo up; }
  export OVS_RUNDIR=$D OVS_DBDIR=$D OVS_LOGDIR=$D
  if ! ralive "$D/ovsdb-server.pid"; then
    [ -e "$D/conf.db" ] || ovsdb-tool create "$D/conf.db" /usr/share/openvswitch/vswitch.ovsschema
    hvexec ovsdb-server "$D/conf.db" --remote="punix:$D/db.sock" --pidfile="$D/ovsdb-server.pid" \
      --log-file="$D/ovsdb-server.log" -vconsole:off --detach --no-chdir
    hvsctl --no-wait init
  fi
  ralive "$D/ovs-vswitchd.pid" || hvexec ovs-vswitchd "unix:$D/db.sock" --pidfile="$D/ovs-vswitchd.pid" \
      --log-file="$D/ovs-vswitchd.log" -vconsole:off --detach --no-chdir
  unset OVS_RUNDIR OVS_DBDIR OVS_LOGDIR
  hvsctl --may-exist add-br br-phys -- set Bridge br-phys datapath_type=netdev
  # the system OVS must not have been touched (the bind mounts stay in their namespaces)
  mountpoint -q /run/openvswitch && { rlog "BUG: /run/openvswitch is a mount point on the host"; return 1; }
  rlog "private OVS: netns $REFENV_OVS_NS, ovsdb-server $(cat "$D/ovsdb-server.pid"), ovs-vswitchd $(cat "$D/ovs-vswitchd.pid"), sockets in $D"
}

release_relay_start() {
  local sock=$RRUN/amqp.sock
  if ! ralive "$RRUN/amqp-relay-host.pid"; then
    (exec setsid socat "UNIX-LISTEN:$sock,fork,unlink-early" TCP:127.0.0.1:5672) > /dev/null 2>&1 < /dev/null &
    echo $! > "$RRUN/amqp-relay-host.pid"
  fi
  if ! ralive "$RRUN/amqp-relay-ns.pid"; then
    (exec setsid ip netns exec "$REFENV_OVS_NS" socat TCP-LISTEN:5672,bind=127.0.0.1,fork,reuseaddr "UNIX-CONNECT:$sock") > /dev/null 2>&1 < /dev/null &
    echo $! > "$RRUN/amqp-relay-ns.pid"
  fi
  local i
  for i in $(seq 1 50); do ip netns exec "$REFENV_OVS_NS" bash -c 'exec 3<>/dev/tcp/127.0.0.1/5672' 2>/dev/null && return 0; sleep 0.1; done
  rlog "AMQP relay into $REFENV_OVS_NS does not answer"; return 1
}

# agent_ini OUT HOST: refenv's openvswitch_agent.ini for the chroot's agent.
# REFENV_AGENT_SET="section.option=value ..." adds options (or replaces them) for that agent, e.g.
# "agent.extensions=qos ovs.qos_meter_bandwidth=True" for the reference's QoS driver; sections
# the file lacks are appended. Values must not contain spaces.
agent_ini() {
  sed -e "s|^host = .*|host = $2|" \
      -e "s|^\[agent\]\$|[agent]\n# written by refenv/release.sh: root inside the chroot, no sudo\nroot_helper = neutron-rootwrap /etc/neutron/rootwrap.conf|" \
      "$HERE/etc/neutron/openvswitch_agent.ini" > "$1"
  local kv sec opt val
  for kv in ${REFENV_AGENT_SET:-}; do
    sec=${kv%%.*}; opt=${kv#*.}; val=${opt#*=}; opt=${opt%%=*}
    [ -n "$sec" ] && [ -n "$opt" ] && [ "$opt" != "$kv" ] || { rlog "REFENV_AGENT_SET: bad item '$kv' (section.option=value)"; return 1; }
    sed -i "/^\[$sec\]\$/,/^\[/{/^$opt *=/d}" "$1"
    grep -q "^\[$sec\]\$" "$1" || printf '\n[%s]\n' "$sec" >> "$1"
    sed -i "s|^\[$sec\]\$|[$sec]\n$opt = $val|" "$1"
  done
}

agent_field() { # alive | started_at of the agent row of $REFENV_AGENT_HOST
  curl -s "http://127.0.0.1:$REFENV_API_PORT/v2.0/agents?host=$REFENV_AGENT_HOST&binary=neutron-openvswitch-agent" \
    | jq -r ".agents[0].$1 // empty" 2>/dev/null || true
}
agent_alive() { agent_field alive; }

release_agent() {
  release_vars
  mkdir -p "$RRUN"
  [ "$(rapi_code)" = 200 ] || { rlog "the $RELEASE API does not answer: run RELEASE=$RELEASE refenv/setup.sh first"; return 1; }
  chroot_mounts "$REFENV_CHROOT"
  mkdir -p "$REFENV_CHROOT/run/openvswitch" "$REFENV_CHROOT/var/lib/neutron/lock" "$REFENV_CHROOT/var/log/neutron"
  release_ovs_start
  release_relay_start
  # a restarted agent's row says alive until agent_down_time passes: wait for a new started_at
  local before=""
  if ralive "$RRUN/ovs-agent.pid"; then
    rlog "reference agent runs (pid $(cat "$RRUN/ovs-agent.pid")): left as it is"
  else
    before=$(agent_field started_at)
    agent_ini "$REFENV_CHROOT$REFENV_CONF/openvswitch_agent.ini" "$REFENV_AGENT_HOST"
    # ip netns exec, unshare, sh, chroot exec in turn: $! is the agent's pid. /sys is mounted
    # again in the chroot so that it shows the netns's devices.
    (cd / && exec setsid nohup ip netns exec "$REFENV_OVS_NS" unshare -m --propagation private sh -c \
      'mount --bind "$1" "$0/run/openvswitch" && mount -t sysfs sysfs "$0/sys" && shift && exec chroot "$0" "$@"' \
      "$REFENV_CHROOT" "$REFENV_OVS_DIR" /usr/bin/neutron-openvswitch-agent \
      --config-file "$REFENV_CONF/neutron.conf" --config-file "$REFENV_CONF/openvswitch_agent.ini" \
      --log-file "/var/log/neutron/$REFENV_NAME-ovs-agent.log") \
      > "$REFENV_CHROOT/var/log/neutron/$REFENV_NAME-ovs-agent.stdout" 2>&1 < /dev/null &
    echo $! > "$RRUN/ovs-agent.pid"
    rlog "reference agent pid $(cat "$RRUN/ovs-agent.pid") as host $REFENV_AGENT_HOST (log $REFENV_CHROOT/var/log/neutron/$REFENV_NAME-ovs-agent.log)"
  fi
  local i a=""
  for i in $(seq 1 180); do
    a=$(agent_alive); [ "$a" = true ] && [ "$(agent_field started_at)" != "$before" ] && break
    ralive "$RRUN/ovs-agent.pid" || { tail -20 "$REFENV_CHROOT/var/log/neutron/$REFENV_NAME-ovs-agent.log" "$REFENV_CHROOT/var/log/neutron/$REFENV_NAME-ovs-agent.stdout" 2>/dev/null; rlog "reference agent exited"; return 1; }
    sleep 1
  done
  [ "$a" = true ] || { rlog "reference agent $REFENV_AGENT_HOST not alive after 180 s"; return 1; }
  rlog "reference agent $REFENV_AGENT_HOST alive (neutron $(release_version))"
}

# pids of processes whose root is the chroot and whose command line names the agent's ini
# (the agent's privsep helpers: daemonised, reparented to init)
agent_helpers() {
  local p
  # candidates by command line (a scan of every /proc entry took a minute on a busy machine)
  for p in $(pgrep -f "privsep-helper.*$REFENV_CONF/openvswitch_agent.ini" || true); do
    [ "$(readlink "/proc/$p/root" 2>/dev/null)" = "$REFENV_CHROOT" ] && echo "$p"
  done
  return 0
}

stop_pid() { # pidfile word grace-seconds
  [ -s "$1" ] || return 0
  local p; p=$(cat "$1")
  if kill -0 "$p" 2>/dev/null && tr '\0' ' ' < "/proc/$p/cmdline" | grep -q -- "$2"; then
    rlog "stopping $(basename "$1" .pid) pid $p"; kill -TERM "$p"
    for _ in $(seq 1 $(( $3 * 2 ))); do kill -0 "$p" 2>/dev/null || break; sleep 0.5; done
    kill -0 "$p" 2>/dev/null && { rlog "$(basename "$1" .pid) still alive, SIGKILL"; kill -KILL "$p"; }
  fi
  rm -f "$1"
}

# release_ref_stop: the reference agent and its privsep helpers only (its OVS stays: a takeover)
release_ref_stop() {
  release_vars
  local p helpers
  helpers=$(agent_helpers)
  # the reference ignores SIGTERM for more than 15 s
  stop_pid "$RRUN/ovs-agent.pid" neutron-openvswitch-agent 20
  for p in $(printf '%s\n' $helpers $(agent_helpers) | sort -u); do   # listed before and after: once each
    [ "$(readlink "/proc/$p/root" 2>/dev/null)" = "$REFENV_CHROOT" ] && { rlog "stopping privsep helper $p"; kill -TERM "$p" 2>/dev/null; }
  done
  return 0
}

release_agent_stop() {
  release_ref_stop
  stop_pid "$RRUN/amqp-relay-ns.pid" socat 5
  stop_pid "$RRUN/amqp-relay-host.pid" socat 5
  stop_pid "$REFENV_OVS_DIR/ovs-vswitchd.pid" ovs-vswitchd 10
  stop_pid "$REFENV_OVS_DIR/ovsdb-server.pid" ovsdb-server 10
  if ip netns list | grep -qx "$REFENV_OVS_NS\( .*\)\?"; then
    [ -z "$(ip netns pids "$REFENV_OVS_NS")" ] && ip netns del "$REFENV_OVS_NS" && rlog "netns $REFENV_OVS_NS deleted"
  fi
  return 0
}

release_stop() {
  release_agent_stop
  release_vars
  local n p
  for n in api periodic-workers rpc-server server; do
    [ -s "$RRUN/$n.pid" ] || continue
    p=$(cat "$RRUN/$n.pid")
    # only if that pid still runs one of ours (a recycled pid is never hit)
    if kill -0 "$p" 2>/dev/null && tr '\0' ' ' < "/proc/$p/cmdline" | grep -q -- "$REFENV_CONF/"; then
      rlog "stopping $n pid $p"; kill -TERM "$p"
      for _ in $(seq 1 30); do kill -0 "$p" 2>/dev/null || break; sleep 0.5; done
      kill -0 "$p" 2>/dev/null && { rlog "$n still alive, SIGKILL"; kill -KILL "$p"; }
    fi
    rm -f "$RRUN/$n.pid"
  done
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -euo pipefail
  export PATH=/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin
  HERE=$(cd "$(dirname "$0")" && pwd)
  RELEASE=${RELEASE:-2026.2}
  case "${1:-env}" in
    env) release_vars
         printf 'REFENV_RELEASE=%q\nREFENV_API_PORT=%q\nREFENV_VHOST=%q\nREFENV_TRANSPORT_URL=%q\nREFENV_DB=%q\nREFENV_CHROOT=%q\nREFENV_VERSION=%q\nREFENV_MESSAGING=%q\nREFENV_LOGS=%q\nREFENV_AGENT_HOST=%q\nREFENV_OVS_NS=%q\nREFENV_OVS_DIR=%q\nREFENV_RUN=%q\nREFENV_AGENT_LOG=%q\n' \
           "$RELEASE" "$REFENV_API_PORT" "$REFENV_VHOST" "$REFENV_TRANSPORT_URL" "$REFENV_DB" "$REFENV_CHROOT" "$(release_version)" "$REFENV_MESSAGING" "$REFENV_CHROOT/var/log/neutron/$REFENV_NAME-*.log" "$REFENV_AGENT_HOST" "$REFENV_OVS_NS" "$REFENV_OVS_DIR" "$RRUN" "$REFENV_CHROOT/var/log/neutron/$REFENV_NAME-ovs-agent.log" ;;
    stop) release_stop ;;
    status) release_vars
            for n in server rpc-server periodic-workers api; do [ -s "$RRUN/$n.pid" ] && echo "$n pid $(cat "$RRUN/$n.pid") $(ralive "$RRUN/$n.pid" && echo alive || echo dead)"; done
            echo "API 127.0.0.1:$REFENV_API_PORT: $(rapi_code); neutron $(release_version); vhost $REFENV_VHOST${REFENV_MESSAGING:+; messaging $REFENV_MESSAGING}"
            if [ -s "$RRUN/ovs-agent.pid" ]; then
              echo "reference agent pid $(cat "$RRUN/ovs-agent.pid") $(ralive "$RRUN/ovs-agent.pid" && echo alive || echo dead), host $REFENV_AGENT_HOST alive in the API: $(agent_alive); private OVS netns $REFENV_OVS_NS, $REFENV_OVS_DIR"
            fi ;;
    agent) release_agent ;;
    agent-stop) release_agent_stop ;;
    ref-stop) release_ref_stop ;;
    *) echo "usage: RELEASE=2025.1|2026.2 [MESSAGING=quorum|classic] $0 env|status|agent|ref-stop|agent-stop|stop" >&2; exit 2 ;;
  esac
fi
