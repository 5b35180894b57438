#!/bin/bash
# scripts/demo.sh — ovsagent end to end on one machine (Debian 12, root):
#   1. installs and starts RabbitMQ, MariaDB, Open vSwitch and the real
#      neutron-server (refenv/setup.sh with AGENT=none);
#   2. builds ovs-agent and runs it as host hv1 with the reference agent's
#      own configuration files (/etc/neutron/refenv/*.conf|ini);
#   3. creates a VXLAN network with two VMs (network namespaces plugged into
#      br-int as nova/os-vif plugs them), waits for ACTIVE and pings.
# Usage: scripts/demo.sh [run|stop]   (run is the default; stop removes the
# demo's VMs, ports and network and stops the agent; KEEP=0 scripts/demo.sh
# does that at the end of the run)
set -euo pipefail
exec </dev/null
export PATH=/usr/local/go/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin:$PATH
TOP=$(cd "$(dirname "$0")/.." && pwd -P)
REFENV=${OVSAGENT_REFENV:-$TOP/refenv}   # the reference environment (override: another copy of refenv/)
API=${API:-http://127.0.0.1:9696/v2.0}
PROJ=demo
RUN=/run/ovsagent; LOGDIR=/var/log/ovsagent
BIN=/usr/local/bin/ovs-agent
CONF="--config-file /etc/neutron/refenv/neutron.conf --config-file /etc/neutron/refenv/openvswitch_agent.ini"
STATE=$RUN/demo.env
T0=$(date +%s%N)
ms_since() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
secs() { printf '%d.%03d' $(($1 / 1000)) $(($1 % 1000)); }   # ms -> s.mmm
say() { printf '[demo %8ss] %s\n' "$(secs "$(ms_since "$T0")")" "$*"; }
die() { say "FAILED: $*"; [ -f $LOGDIR/ovs-agent.log ] && { echo "--- last agent log lines:"; tail -20 $LOGDIR/ovs-agent.log; }; exit 1; }
api() { # method path [json]
  if [ -n "${3:-}" ]; then curl -sS -f -X "$1" -H 'Content-Type: application/json' -H "X-Project-Id: $PROJ" -d "$3" "$API$2"
  else curl -sS -f -X "$1" -H "X-Project-Id: $PROJ" "$API$2"; fi
}
# stop a process by its pid file, after checking its command line is still ours
stop_pid() { # pidfile cmdline-word
  [ -s "$1" ] || return 0
  local p; p=$(cat "$1")
  if tr '\0' ' ' < /proc/$p/cmdline 2>/dev/null | grep -q -- "$2"; then
    say "stopping $2 (pid $p)"; kill -TERM "$p"
    for _ in $(seq 1 40); do kill -0 "$p" 2>/dev/null || break; sleep 0.5; done
    if kill -0 "$p" 2>/dev/null && tr '\0' ' ' < /proc/$p/cmdline 2>/dev/null | grep -q -- "$2"; then
      say "$2 still running after 20 s: SIGKILL"; kill -KILL "$p"
    fi
  fi
  rm -f "$1"
}
cleanup_demo() {
  if [ -f $STATE ]; then
    . $STATE
    for i in 1 2; do
      eval "tap=\${TAP$i:-}; port=\${PORT$i:-}"
      [ -n "$tap" ] && { ovs-vsctl --if-exists del-port br-int "$tap"; ip link del "$tap" 2>/dev/null || true; }
      [ -n "$port" ] && api DELETE "/ports/$port" >/dev/null 2>&1 || true
    done
    [ -n "${NET:-}" ] && api DELETE "/networks/$NET" >/dev/null 2>&1 || true
    rm -f $STATE
  fi
  for ns in demo-vm1 demo-vm2; do ip netns del $ns 2>/dev/null || true; done
}

[ "$(id -u)" = 0 ] || { echo "run as root"; exit 1; }
mkdir -p $RUN $LOGDIR
if [ "${1:-run}" = stop ]; then
  cleanup_demo; stop_pid $RUN/ovs-agent.pid "$BIN"; say "demo removed, agent stopped"; exit 0
fi
# the e2e suite uses the same br-int and host hv1: never at the same time
# (the lock is held while this script runs; the agent does not inherit it)
exec 9>/run/ovsagent-e2e.lock
flock -n 9 || { echo "waiting for the e2e run holding /run/ovsagent-e2e.lock"; flock -w 900 9; } || { echo "still locked after 15 min"; exit 1; }
T0=$(date +%s%N)

# ---------------------------------------------------------------- 1. services
[ -x "$REFENV/setup.sh" ] || die "refenv not found: $REFENV/setup.sh is missing"
say "setting up RabbitMQ, MariaDB, Open vSwitch, neutron-server (first time: several minutes)"
AGENT=none "$REFENV/setup.sh" > $LOGDIR/refenv-setup.log 2>&1 || { tail -20 $LOGDIR/refenv-setup.log; die "refenv setup failed (log $LOGDIR/refenv-setup.log)"; }
say "neutron-server answers on $API"
# the reference Python agent must not own hv1 at the same time
stop_pid /run/refenv/ovs-agent.pid neutron-openvswitch-agent

# ---------------------------------------------------------------- 2. the agent
command -v go >/dev/null || die "Go >= 1.26 is needed at /usr/local/go (https://go.dev/dl/)"
say "building ovs-agent -> $BIN"
# CGO_ENABLED=0: a static binary (pure-Go resolver; nothing here needs cgo), no
# libc or ld.so mapped into the agent (1.4 MiB of RSS less)
(cd "$TOP" && CGO_ENABLED=0 go build -o $BIN ./cmd/ovs-agent) || die "go build failed"
$BIN check-config $CONF || die "configuration rejected"
cleanup_demo
stop_pid $RUN/ovs-agent.pid "$BIN"
agent_row() { api GET "/agents?host=hv1&binary=neutron-openvswitch-agent" | jq -r ".agents[0].$1 // empty"; }
started_before=$(agent_row started_at)
setsid nohup $BIN $CONF --log-file $LOGDIR/ovs-agent.log > $LOGDIR/ovs-agent.stdout 2>&1 < /dev/null 9>&- &
echo $! > $RUN/ovs-agent.pid
say "ovs-agent started as host hv1 (pid $(cat $RUN/ovs-agent.pid), log $LOGDIR/ovs-agent.log)"
alive=false
for _ in $(seq 1 300); do
  kill -0 "$(cat $RUN/ovs-agent.pid)" 2>/dev/null || die "ovs-agent exited (see $LOGDIR/ovs-agent.stdout)"
  # alive with a new started_at: this run's first report (start_flag) arrived
  alive=$(agent_row alive); started=$(agent_row started_at)
  [ "$alive" = true ] && [ "$started" != "$started_before" ] && break; sleep 0.2
done
[ "$alive" = true ] || die "agent hv1 is not alive in GET /agents after 60 s"
say "agent hv1 alive in neutron"

# ---------------------------------------------------------------- 3. VXLAN network, two VMs
NET=$(api POST /networks "{\"network\":{\"name\":\"demo-vxnet\",\"project_id\":\"$PROJ\",\"provider:network_type\":\"vxlan\"}}" | jq -r .network.id)
echo "NET=$NET" > $STATE
api POST /subnets "{\"subnet\":{\"name\":\"demo-sub\",\"project_id\":\"$PROJ\",\"network_id\":\"$NET\",\"ip_version\":4,\"cidr\":\"10.200.0.0/24\",\"gateway_ip\":null,\"enable_dhcp\":false}}" >/dev/null
MTU=$(api GET "/networks/$NET" | jq -r .network.mtu)
say "network $NET: vxlan VNI $(api GET "/networks/$NET" | jq -r '.network["provider:segmentation_id"]'), MTU $MTU"
for i in 1 2; do
  PJ=$(api POST /ports "{\"port\":{\"name\":\"demo-vm$i\",\"project_id\":\"$PROJ\",\"network_id\":\"$NET\",\"binding:host_id\":\"hv1\",\"device_owner\":\"compute:nova\",\"device_id\":\"$(uuidgen)\"}}")
  id=$(jq -r .port.id <<<"$PJ"); mac=$(jq -r .port.mac_address <<<"$PJ"); ip=$(jq -r '.port.fixed_ips[0].ip_address' <<<"$PJ"); dev=$(jq -r .port.device_id <<<"$PJ")
  tap="tap${id:0:11}"; ns=demo-vm$i
  echo "PORT$i=$id TAP$i=$tap IP$i=$ip" >> $STATE
  ip netns add $ns
  ip link add "$tap" mtu "$MTU" type veth peer name "v${id:0:11}" mtu "$MTU"
  ip link set "v${id:0:11}" netns $ns
  ip netns exec $ns ip link set "v${id:0:11}" name eth0
  ip netns exec $ns ip link set eth0 address "$mac"
  ip netns exec $ns ip addr add "$ip/24" dev eth0
  ip netns exec $ns ip link set lo up
  ip netns exec $ns ip link set eth0 up
  ip netns exec $ns ethtool -K eth0 tx off >/dev/null 2>&1 || true
  ethtool -K "$tap" tx off >/dev/null 2>&1 || true
  ip link set "$tap" up
  t0=$(date +%s%N)
  ovs-vsctl -- --may-exist add-port br-int "$tap" -- set Interface "$tap" external_ids:iface-id="$id" \
    external_ids:attached-mac="$mac" external_ids:iface-status=active external_ids:vm-uuid="$dev"
  st=DOWN
  for _ in $(seq 1 600); do st=$(api GET "/ports/$id?fields=status" | jq -r .port.status); [ "$st" = ACTIVE ] && break; sleep 0.1; done
  [ "$st" = ACTIVE ] || die "port $id of $ns is $st after 60 s"
  say "$ns: port $id ($ip, $mac) ACTIVE $(secs "$(ms_since "$t0")") s after plugging"
done
. $STATE
for pair in "demo-vm1 $IP2" "demo-vm2 $IP1"; do
  set -- $pair
  if out=$(ip netns exec $1 ping -c 5 -i 0.2 -W 2 "$2"); then
    say "$1 -> $2: $(grep -o '[0-9]* received' <<<"$out"), $(grep -o 'rtt.*' <<<"$out")"
  else
    die "$1 cannot ping $2: $(grep 'packets' <<<"$out")"
  fi
done
say "done: two VMs on a VXLAN network wired by ovsagent. Flows: ovs-ofctl -O OpenFlow13 dump-flows br-int"
say "metrics: curl -s http://127.0.0.1:19696/metrics; remove the demo: scripts/demo.sh stop"
if [ "${KEEP:-1}" = 0 ]; then
  cleanup_demo; stop_pid $RUN/ovs-agent.pid "$BIN"; say "KEEP=0: demo removed, agent stopped"
fi
