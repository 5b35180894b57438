#!/bin/bash
# refenv release.sh — a newer neutron-server (RELEASE=2025.1 or 2026.2) from Debian packages in a
# debootstrap chroot, against the host's MariaDB and RabbitMQ. Sourced by setup.sh (release_setup);
# run directly:
#   RELEASE=2026.2 refenv/release.sh env     prints REFENV_* shell assignments (API port, vhost,
#                                            transport_url, database, chroot, version)
#   RELEASE=2026.2 refenv/release.sh stop    stops that release's daemons (by pid file)
#   RELEASE=2026.2 refenv/release.sh status  pid files, API answer, version
# MESSAGING=quorum, classic or quorumlimits selects a second server of the release with other
# [oslo_messaging_rabbit] options ($REFENV_MESSAGING, see messaging_vars), on its own API port,
# vhost, database, configuration directory, log names and pid directory: both can run at once.
# VARIANT=dvr is another such server: the router plugin, router_distributed = True (variant_vars);
#   RELEASE=2026.2 VARIANT=dvr refenv/release.sh l3agent   the chroot's neutron-l3-agent (installed
#                                            on first use) beside the reference agent, same host
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
  REFENV_VARIANT=""
  messaging_vars || return 2
  variant_vars || return 2
  REFENV_CONF=/etc/neutron/$REFENV_NAME
  # AGENT=python: the chroot's reference agent as its own host on a private OVS (see release_agent)
  local sfx=${MESSAGING:-${VARIANT:-}}
  # HV=2..9: another hypervisor of the same server (DVR's compute hosts, issue 16): host, netns,
  # private OVS, pid directory ($RHV), agent ini and log names of its own; HV=1 (the default) is
  # the names above, unchanged
  REFENV_HV=${HV:-1}
  case "$REFENV_HV" in 1) HVSFX="" ;; [2-9]) HVSFX=-hv$REFENV_HV ;; *) echo "release.sh: HV=$HV is not 1..9" >&2; return 2 ;; esac
  RHV=$RRUN${HVSFX:+/hv$REFENV_HV}
  REFENV_AGENT_HOST=refhv-${RELEASE//./-}${sfx:+-$sfx}$HVSFX   # oslo host: a numeric last label is refused
  REFENV_OVS_NS=refenv-$RELEASE${sfx:+-$sfx}$HVSFX
  REFENV_OVS_DIR=$RHV/ovs
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
#   quorumlimits  quorum's options plus rabbit_quorum_delivery_limit, rabbit_quorum_max_memory_length
#            and _bytes: every quorum queue (topic and reply queues) carries x-delivery-limit and
#            x-max-in-memory-length/-bytes. A variant of its own (not quorum with more options):
#            durable quorum queues outlive every process, and one declared with other arguments
#            would refuse the next declaration (406) in a shared vhost
# A variant's vhost holds durable queues declared with its options: when release_setup
# (re)configures a variant's server it makes the vhost anew (fresh_vhost), and a running server
# whose neutron.conf has other options than these is restarted (conf_current).
messaging_vars() {
  local off kolla=rabbit_quorum_queue=true,rabbit_transient_quorum_queue=true,rabbit_stream_fanout=true,use_queue_manager=true,rabbit_qos_prefetch_count=10
  case "${MESSAGING:-}" in
    "") return 0 ;;
    quorum) off=1; REFENV_MESSAGING=$kolla ;;
    classic) off=2; REFENV_MESSAGING=amqp_durable_queues=true,amqp_auto_delete=true,rabbit_ha_queues=true ;;
    # off 3 is VARIANT=dvr
    quorumlimits) off=4; REFENV_MESSAGING=$kolla,rabbit_quorum_delivery_limit=10,rabbit_quorum_max_memory_length=1000,rabbit_quorum_max_memory_bytes=8388608 ;;
    *) echo "release.sh: MESSAGING=$MESSAGING is not a messaging variant (quorum, classic, quorumlimits)" >&2; return 2 ;;
  esac
  REFENV_API_PORT=$((REFENV_API_PORT + off))
  REFENV_DB=${REFENV_DB}_$MESSAGING
  REFENV_VHOST=$REFENV_VHOST-$MESSAGING
  REFENV_TRANSPORT_URL="rabbit://guest:guest@127.0.0.1:5672/$REFENV_VHOST"
  RRUN=$RRUN-$MESSAGING
  REFENV_NAME=refenv-$MESSAGING
}

# variant_vars: VARIANT=<name> is a second server of the release with other *service* options
# (not messaging ones), on its own API port, vhost, database, names and pid directory like a
# messaging variant:
#   dvr   service_plugins = router,qos,trunk and router_distributed = True (issue 16): routers
#         are distributed; the L3 agent (release.sh l3agent) and the reference agent with
#         REFENV_AGENT_SET="agent.enable_distributed_routing=True ..." run against it
variant_vars() {
  local off
  case "${VARIANT:-}" in
    "") return 0 ;;
    dvr) off=3 ;;
    *) echo "release.sh: VARIANT=$VARIANT is not a server variant (dvr)" >&2; return 2 ;;
  esac
  [ -z "${MESSAGING:-}" ] || { echo "release.sh: VARIANT=$VARIANT and MESSAGING=$MESSAGING do not combine" >&2; return 2; }
  REFENV_VARIANT=$VARIANT
  REFENV_API_PORT=$((REFENV_API_PORT + off))
  REFENV_DB=${REFENV_DB}_$VARIANT
  REFENV_VHOST=$REFENV_VHOST-$VARIANT
  REFENV_TRANSPORT_URL="rabbit://guest:guest@127.0.0.1:5672/$REFENV_VHOST"
  RRUN=$RRUN-$VARIANT
  REFENV_NAME=refenv-$VARIANT
}

rlog() { echo "[release $RELEASE${MESSAGING:+ $MESSAGING}${VARIANT:+ $VARIANT} $(date +%T)] $*"; }
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

# messaging_block: the [oslo_messaging_rabbit] lines write_conf appends for a messaging variant
messaging_block() {
  [ -z "$REFENV_MESSAGING" ] || { echo "# MESSAGING=$MESSAGING"; tr ',' '\n' <<< "$REFENV_MESSAGING" | sed 's/=/ = /'; }
}

# conf_current: the neutron.conf the running server read has this variant's transport_url and
# messaging lines (a server configured by an older release.sh, or with a variant's older option
# set, is not reused: its vhost may hold queues declared with other arguments)
conf_current() {
  local f=$REFENV_CHROOT$REFENV_CONF/neutron.conf
  [ -s "$f" ] || return 1
  grep -qxF "transport_url = $REFENV_TRANSPORT_URL" "$f" || return 1
  [ "$(sed -n '/^# MESSAGING=/,$p' "$f")" = "$(messaging_block)" ]
}

# fresh_vhost: a messaging variant's vhost is deleted before its server is (re)configured: its
# durable (quorum) queues were declared with the options of an earlier run, and a queue's
# arguments never change (a declaration with others is refused, 406). The server is down here;
# agents of that vhost reconnect and declare again.
fresh_vhost() {
  [ -n "$REFENV_MESSAGING" ] || return 0
  if $RMQ -q list_vhosts 2>/dev/null | grep -qxF "$REFENV_VHOST"; then
    rlog "deleting vhost $REFENV_VHOST (its queues were declared by an earlier run; made anew below)"
    $RMQ -q delete_vhost "$REFENV_VHOST" >/dev/null
  fi
}

# write_conf: refenv's Zed configuration with this release's port, database and vhost (and a
# messaging variant's options, lock directory and configuration directory).
write_conf() {
  local d=$REFENV_CHROOT$REFENV_CONF lock=/var/lib/neutron/lock
  [ "$REFENV_NAME" = refenv ] || lock=/var/lib/neutron/lock-$REFENV_NAME   # no lock shared with the other server
  mkdir -p "$d" "$REFENV_CHROOT$lock" "$REFENV_CHROOT/var/log/neutron"
  install -m 644 "$HERE"/etc/neutron/ml2_conf.ini "$d/"
  # port hints (2023.2 on; Zed, on the host, has no such drivers): the tx-steering hint the
  # reference agent writes to the VIF's Interface other_config (test/e2e TestPortHintsTxSteering)
  sed -i 's|^extension_drivers = port_security,qos$|extension_drivers = port_security,qos,port_hints,port_hint_ovs_tx_steering|' "$d/ml2_conf.ini"
  grep -q '^extension_drivers = .*port_hint_ovs_tx_steering' "$d/ml2_conf.ini" || { rlog "write_conf: no extension_drivers line to extend"; return 1; }
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
  messaging_block >> "$d/neutron.conf"
  # VARIANT=dvr: the router service plugin, routers distributed by default (l2population is in
  # refenv's ml2_conf.ini already)
  if [ "$REFENV_VARIANT" = dvr ]; then
    sed -i -e 's|^service_plugins = .*|service_plugins = router,qos,trunk\n# VARIANT=dvr\nrouter_distributed = True|' "$d/neutron.conf"
    grep -q '^router_distributed = True' "$d/neutron.conf" || { rlog "write_conf: no service_plugins line to extend"; return 1; }
  fi
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
       [ "$(curl -s -o /dev/null -w '%{http_code}' -H 'X-Project-Id: demo' "http://127.0.0.1:$REFENV_API_PORT/v2.0/trunks" || true)" != 200 ] ||
       [ "$(curl -s -o /dev/null -w '%{http_code}' -H 'X-Project-Id: demo' "http://127.0.0.1:$REFENV_API_PORT/v2.0/extensions/port-hint-ovs-tx-steering" || true)" != 200 ]; }; then
    rlog "neutron $RELEASE has no QoS, trunk or port-hints API (a configuration from before them): restarting it reconfigured"
    release_stop
  fi
  if [ "$(rapi_code)" = 200 ] && ! conf_current; then
    rlog "neutron $RELEASE runs with other [oslo_messaging_rabbit] options or vhost than $REFENV_VHOST${REFENV_MESSAGING:+ with $REFENV_MESSAGING}: restarting it reconfigured"
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
    fresh_vhost
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
  # REFENV_UNDERLAY=ADDR/LEN: a tunnel endpoint for hypervisors that talk to each other (dvr.sh
  # TWO=1): the netdev datapath's own tunnels route through an OVS bridge, so the address is on
  # br-underlay's internal port (in the netns); the agent's local_ip must exist before it starts
  if [ -n "${REFENV_UNDERLAY:-}" ]; then
    hvsctl --may-exist add-br br-underlay -- set Bridge br-underlay datapath_type=netdev
    ip -n "$REFENV_OVS_NS" addr replace "$REFENV_UNDERLAY" dev br-underlay
    ip -n "$REFENV_OVS_NS" link set br-underlay mtu 1500 up
  fi
  # the system OVS must not have been touched (the bind mounts stay in their namespaces)
  mountpoint -q /run/openvswitch && { rlog "BUG: /run/openvswitch is a mount point on the host"; return 1; }
  rlog "private OVS: netns $REFENV_OVS_NS, ovsdb-server $(cat "$D/ovsdb-server.pid"), ovs-vswitchd $(cat "$D/ovs-vswitchd.pid"), sockets in $D"
}

release_relay_start() {
  local sock=$RHV/amqp.sock
  if ! ralive "$RHV/amqp-relay-host.pid"; then
    (exec setsid socat "UNIX-LISTEN:$sock,fork,unlink-early" TCP:127.0.0.1:5672) > /dev/null 2>&1 < /dev/null &
    echo $! > "$RHV/amqp-relay-host.pid"
  fi
  if ! ralive "$RHV/amqp-relay-ns.pid"; then
    (exec setsid ip netns exec "$REFENV_OVS_NS" socat TCP-LISTEN:5672,bind=127.0.0.1,fork,reuseaddr "UNIX-CONNECT:$sock") > /dev/null 2>&1 < /dev/null &
    echo $! > "$RHV/amqp-relay-ns.pid"
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
  mkdir -p "$RHV"
  [ "$(rapi_code)" = 200 ] || { rlog "the $RELEASE API does not answer: run RELEASE=$RELEASE refenv/setup.sh first"; return 1; }
  chroot_mounts "$REFENV_CHROOT"
  mkdir -p "$REFENV_CHROOT/run/openvswitch" "$REFENV_CHROOT/var/lib/neutron/lock" "$REFENV_CHROOT/var/log/neutron"
  release_ovs_start
  release_relay_start
  # a restarted agent's row says alive until agent_down_time passes: wait for a new started_at
  local before=""
  if ralive "$RHV/ovs-agent.pid"; then
    rlog "reference agent runs (pid $(cat "$RHV/ovs-agent.pid")): left as it is"
  else
    before=$(agent_field started_at)
    agent_ini "$REFENV_CHROOT$REFENV_CONF/openvswitch_agent$HVSFX.ini" "$REFENV_AGENT_HOST"
    # ip netns exec, unshare, sh, chroot exec in turn: $! is the agent's pid. /sys is mounted
    # again in the chroot so that it shows the netns's devices.
    (cd / && exec setsid nohup ip netns exec "$REFENV_OVS_NS" unshare -m --propagation private sh -c \
      'mount --bind "$1" "$0/run/openvswitch" && mount -t sysfs sysfs "$0/sys" && shift && exec chroot "$0" "$@"' \
      "$REFENV_CHROOT" "$REFENV_OVS_DIR" /usr/bin/neutron-openvswitch-agent \
      --config-file "$REFENV_CONF/neutron.conf" --config-file "$REFENV_CONF/openvswitch_agent$HVSFX.ini" \
      --log-file "/var/log/neutron/$REFENV_NAME$HVSFX-ovs-agent.log") \
      > "$REFENV_CHROOT/var/log/neutron/$REFENV_NAME$HVSFX-ovs-agent.stdout" 2>&1 < /dev/null &
    echo $! > "$RHV/ovs-agent.pid"
    rlog "reference agent pid $(cat "$RHV/ovs-agent.pid") as host $REFENV_AGENT_HOST (log $REFENV_CHROOT/var/log/neutron/$REFENV_NAME$HVSFX-ovs-agent.log)"
  fi
  local i a=""
  for i in $(seq 1 180); do
    a=$(agent_alive); [ "$a" = true ] && [ "$(agent_field started_at)" != "$before" ] && break
    ralive "$RHV/ovs-agent.pid" || { tail -20 "$REFENV_CHROOT/var/log/neutron/$REFENV_NAME$HVSFX-ovs-agent.log" "$REFENV_CHROOT/var/log/neutron/$REFENV_NAME$HVSFX-ovs-agent.stdout" 2>/dev/null; rlog "reference agent exited"; return 1; }
    sleep 1
  done
  [ "$a" = true ] || { rlog "reference agent $REFENV_AGENT_HOST not alive after 180 s"; return 1; }
  rlog "reference agent $REFENV_AGENT_HOST alive (neutron $(release_version))"
}

# ------------------------------------------------------------------ l3agent (VARIANT=dvr)
# The release's own neutron-l3-agent as the same host as the reference agent ($REFENV_AGENT_HOST),
# in the same netns and with the same private OVS on /run/openvswitch, in a mount namespace of its
# own where
# - the chroot is bound onto itself (rbind, with its /proc, /dev, /sys): `ip netns exec` runs
#   `mount --make-rslave /`, which fails unless the chroot's root is a mount point;
# - a tmpfs is on the chroot's /run/netns: the qrouter-/snat-/fip- namespaces the agent makes are
#   bind mounts there, seen only in that mount namespace and gone with it (no stale namespace
#   files in the chroot for the next start; when the agent and its helpers exit, the namespaces
#   and the veths in them go too). From the host: `release.sh l3exec ip netns` (nsenter -m -n -r
#   into the agent's namespaces, the chroot's tools).
# - ovs_use_veth = True: with the netdev datapath an OVS internal port is a tap device of
#   ovs-vswitchd, which does not follow it into another netns; a veth (OVS side tap<id>, the
#   namespace side qr-/sg-/qg-/fg-<id>) does, and neutron turns its offloads off for netdev.
# L3_AGENT_MODE (default dvr_snat), L3_DEBUG=True for a debug log.
l3_ini() { # OUT
  cat > "$1" <<EOF
# written by refenv/release.sh l3agent
[DEFAULT]
host = $REFENV_AGENT_HOST
interface_driver = openvswitch
agent_mode = ${L3_AGENT_MODE:-dvr_snat}
ovs_use_veth = True
enable_metadata_proxy = False
debug = ${L3_DEBUG:-False}

[agent]
root_helper = neutron-rootwrap /etc/neutron/rootwrap.conf

[ovs]
integration_bridge = br-int
datapath_type = netdev
ovsdb_connection = unix:/var/run/openvswitch/db.sock
EOF
}

l3_field() { # alive | started_at of the L3 agent row of $REFENV_AGENT_HOST
  curl -s "http://127.0.0.1:$REFENV_API_PORT/v2.0/agents?host=$REFENV_AGENT_HOST&binary=neutron-l3-agent" \
    | jq -r ".agents[0].$1 // empty" 2>/dev/null || true
}

release_l3agent() {
  release_vars
  mkdir -p "$RHV"
  [ "$(curl -s -o /dev/null -w '%{http_code}' -H 'X-Project-Id: demo' "http://127.0.0.1:$REFENV_API_PORT/v2.0/routers" || true)" = 200 ] \
    || { rlog "no router API on 127.0.0.1:$REFENV_API_PORT: the L3 agent needs VARIANT=dvr (RELEASE=$RELEASE VARIANT=dvr AGENT=none refenv/setup.sh)"; return 1; }
  hvsctl br-exists br-int 2>/dev/null || { rlog "no br-int on the private OVS of $REFENV_AGENT_HOST: start the reference agent first (release.sh agent)"; return 1; }
  chroot_mounts "$REFENV_CHROOT"
  # installed once, pinned to the chroot's neutron (a newer neutron-l3-agent in the mirror would
  # pull a newer python3-neutron into the chroot every helper tests against); ethtool: neutron
  # turns a veth's offloads off with it for the netdev datapath (ovs_use_veth below)
  if [ "$(chroot "$REFENV_CHROOT" dpkg-query -W -f '${Status}\n' neutron-l3-agent ethtool 2>/dev/null | grep -c 'ok installed')" != 2 ]; then
    local v; v=$(release_version)
    rlog "apt-get install neutron-l3-agent=$v ethtool inside the chroot (log $REFENV_CHROOT.l3-apt.log)"
    chroot "$REFENV_CHROOT" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "neutron-l3-agent=$v" ethtool \
      > "$REFENV_CHROOT.l3-apt.log" 2>&1 || { tail -20 "$REFENV_CHROOT.l3-apt.log"; rlog "apt-get install neutron-l3-agent failed"; return 1; }
  fi
  release_relay_start
  local before=""
  if ralive "$RHV/l3-agent.pid"; then
    rlog "L3 agent runs (pid $(cat "$RHV/l3-agent.pid")): left as it is"
  else
    before=$(l3_field started_at)
    l3_ini "$REFENV_CHROOT$REFENV_CONF/l3_agent$HVSFX.ini"
    (cd / && exec setsid nohup ip netns exec "$REFENV_OVS_NS" unshare -m --propagation private sh -c \
      'mount --rbind "$0" "$0" && mount --bind "$1" "$0/run/openvswitch" && mount -t sysfs sysfs "$0/sys" &&
       mkdir -p "$0/run/netns" && mount -t tmpfs -o mode=0755 refenv-netns "$0/run/netns" && shift && exec chroot "$0" "$@"' \
      "$REFENV_CHROOT" "$REFENV_OVS_DIR" /usr/bin/neutron-l3-agent \
      --config-file "$REFENV_CONF/neutron.conf" --config-file "$REFENV_CONF/l3_agent$HVSFX.ini" \
      --log-file "/var/log/neutron/$REFENV_NAME$HVSFX-l3-agent.log") \
      > "$REFENV_CHROOT/var/log/neutron/$REFENV_NAME$HVSFX-l3-agent.stdout" 2>&1 < /dev/null &
    echo $! > "$RHV/l3-agent.pid"
    rlog "L3 agent pid $(cat "$RHV/l3-agent.pid") as host $REFENV_AGENT_HOST, agent_mode ${L3_AGENT_MODE:-dvr_snat} (log $REFENV_CHROOT/var/log/neutron/$REFENV_NAME$HVSFX-l3-agent.log)"
  fi
  local i a=""
  for i in $(seq 1 180); do
    a=$(l3_field alive); [ "$a" = true ] && [ "$(l3_field started_at)" != "$before" ] && break
    ralive "$RHV/l3-agent.pid" || { tail -20 "$REFENV_CHROOT/var/log/neutron/$REFENV_NAME$HVSFX-l3-agent.log" "$REFENV_CHROOT/var/log/neutron/$REFENV_NAME$HVSFX-l3-agent.stdout" 2>/dev/null; rlog "L3 agent exited"; return 1; }
    sleep 1
  done
  [ "$a" = true ] || { rlog "L3 agent $REFENV_AGENT_HOST not alive after 180 s"; return 1; }
  rlog "L3 agent $REFENV_AGENT_HOST alive (agent_mode $(curl -s "http://127.0.0.1:$REFENV_API_PORT/v2.0/agents?host=$REFENV_AGENT_HOST&binary=neutron-l3-agent" | jq -r '.agents[0].configurations.agent_mode'))"
}

# l3exec CMD...: CMD in the L3 agent's network and mount namespaces with the chroot as root
# (its qrouter-/snat-/fip- namespaces: `l3exec ip netns exec qrouter-<id> ip addr`)
release_l3exec() {
  release_vars
  ralive "$RHV/l3-agent.pid" || { rlog "no L3 agent runs ($RHV/l3-agent.pid)"; return 1; }
  nsenter -t "$(cat "$RHV/l3-agent.pid")" -m -n -r -w "$@"
}

release_l3_stop() {
  release_vars
  local p helpers
  helpers=$(agent_helpers "l3_agent$HVSFX.ini")
  stop_pid "$RHV/l3-agent.pid" neutron-l3-agent 20
  for p in $helpers $(agent_helpers "l3_agent$HVSFX.ini"); do
    [ "$(readlink "/proc/$p/root" 2>/dev/null)" = "$REFENV_CHROOT" ] && { rlog "stopping L3 privsep helper $p"; kill -TERM "$p" 2>/dev/null; }
  done
  return 0
}

# pids of processes whose root is the chroot and whose command line names the agent's ini
# (the agent's privsep helpers: daemonised, reparented to init); $1: another ini (l3_agent.ini)
agent_helpers() {
  local p
  # candidates by command line (a scan of every /proc entry took a minute on a busy machine)
  for p in $(pgrep -f "privsep-helper.*$REFENV_CONF/${1:-openvswitch_agent$HVSFX.ini}" || true); do
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
  stop_pid "$RHV/ovs-agent.pid" neutron-openvswitch-agent 20
  for p in $(printf '%s\n' $helpers $(agent_helpers) | sort -u); do   # listed before and after: once each
    [ "$(readlink "/proc/$p/root" 2>/dev/null)" = "$REFENV_CHROOT" ] && { rlog "stopping privsep helper $p"; kill -TERM "$p" 2>/dev/null; }
  done
  return 0
}

release_agent_stop() {
  release_l3_stop
  release_ref_stop
  stop_pid "$RHV/amqp-relay-ns.pid" socat 5
  stop_pid "$RHV/amqp-relay-host.pid" socat 5
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
         printf 'REFENV_RELEASE=%q\nREFENV_API_PORT=%q\nREFENV_VHOST=%q\nREFENV_TRANSPORT_URL=%q\nREFENV_DB=%q\nREFENV_CHROOT=%q\nREFENV_VERSION=%q\nREFENV_MESSAGING=%q\nREFENV_LOGS=%q\nREFENV_AGENT_HOST=%q\nREFENV_OVS_NS=%q\nREFENV_OVS_DIR=%q\nREFENV_VARIANT=%q\nREFENV_HV=%q\nREFENV_RUN=%q\nREFENV_AGENT_LOG=%q\n' \
           "$RELEASE" "$REFENV_API_PORT" "$REFENV_VHOST" "$REFENV_TRANSPORT_URL" "$REFENV_DB" "$REFENV_CHROOT" "$(release_version)" "$REFENV_MESSAGING" "$REFENV_CHROOT/var/log/neutron/$REFENV_NAME-*.log" "$REFENV_AGENT_HOST" "$REFENV_OVS_NS" "$REFENV_OVS_DIR" "$REFENV_VARIANT" "$REFENV_HV" "$RHV" "$REFENV_CHROOT/var/log/neutron/$REFENV_NAME$HVSFX-ovs-agent.log" ;;
    stop) release_stop ;;
    status) release_vars
            for n in server rpc-server periodic-workers api; do [ -s "$RRUN/$n.pid" ] && echo "$n pid $(cat "$RRUN/$n.pid") $(ralive "$RRUN/$n.pid" && echo alive || echo dead)"; done
            echo "API 127.0.0.1:$REFENV_API_PORT: $(rapi_code); neutron $(release_version); vhost $REFENV_VHOST${REFENV_MESSAGING:+; messaging $REFENV_MESSAGING}${REFENV_VARIANT:+; variant $REFENV_VARIANT}"
            if [ -s "$RHV/ovs-agent.pid" ]; then
              echo "reference agent pid $(cat "$RHV/ovs-agent.pid") $(ralive "$RHV/ovs-agent.pid" && echo alive || echo dead), host $REFENV_AGENT_HOST alive in the API: $(agent_alive); private OVS netns $REFENV_OVS_NS, $REFENV_OVS_DIR"
            fi
            if [ -s "$RHV/l3-agent.pid" ]; then
              echo "L3 agent pid $(cat "$RHV/l3-agent.pid") $(ralive "$RHV/l3-agent.pid" && echo alive || echo dead), host $REFENV_AGENT_HOST alive in the API: $(l3_field alive)"
            fi ;;
    agent) release_agent ;;
    agent-stop) release_agent_stop ;;
    l3agent) release_l3agent ;;
    l3-stop) release_l3_stop ;;
    l3exec) shift; release_l3exec "$@" ;;
    ref-stop) release_ref_stop ;;
    *) echo "usage: RELEASE=2025.1|2026.2 [MESSAGING=quorum|classic|quorumlimits | VARIANT=dvr [HV=2..9]] $0 env|status|agent|ref-stop|agent-stop|stop|l3agent|l3-stop|l3exec CMD..." >&2; exit 2 ;;
  esac
fi
