#!/bin/bash
# refenv mixed_quorum.sh — a mixed broker with kolla's messaging options: the 2026.2 chroot's reference
# neutron-openvswitch-agent (host refhv-quorum, on a private OVS in netns refq) and ovs-agent (smoke.sh,
# host hvsmoke-<pid>, its own private OVS) on the vhost of the MESSAGING=quorum server, both with the
# server's [oslo_messaging_rabbit] options; a port of one network on each host must turn ACTIVE, and
# neither agent, the server nor the broker may log a 406 / channel exception.
#   RELEASE=2026.2 MESSAGING=quorum AGENT=none refenv/setup.sh    first: the quorum server
#   refenv/mixed_quorum.sh start | check | stop
# No e2e lock: neither agent touches the system OVS or host hv1. The reference agent is run the way
# branch refagent's release.sh runs it for the plain server (private ovsdb-server/ovs-vswitchd in a
# netns, their socket directory bound on the chroot's /run/openvswitch in a mount namespace, AMQP
# relayed into the netns by socat, rootwrap without sudo) with the quorum server's configuration
# directory; once release.sh's AGENT=python honours MESSAGING this script's start/stop go there.
set -euo pipefail
export PATH=/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin
HERE=$(cd "$(dirname "$0")" && pwd)
for _f in /proc/$$/fd/*; do _f=${_f##*/}; if [ "$_f" -gt 2 ] && [ "$_f" -lt 255 ]; then eval "exec $_f>&-"; fi; done 2>/dev/null
C=/var/lib/ovsagent-refenv/2026.2; R=/run/refenv/2026.2-quorum; D=$R/refovs; NS=refq; HOST=refhv-quorum
CONF=/etc/neutron/refenv-quorum
log() { echo "[mixed_quorum $(date +%T)] $*"; }
alive() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }
stop_pid() { [ -s "$1" ] || return 0; local p; p=$(cat "$1")
  if kill -0 "$p" 2>/dev/null && tr '\0' ' ' < /proc/$p/cmdline | grep -q -- "$2"; then
    kill -TERM "$p"; for _ in $(seq 1 $(( $3 * 2 ))); do kill -0 "$p" 2>/dev/null || break; sleep 0.5; done
    kill -0 "$p" 2>/dev/null && kill -KILL "$p"; log "stopped $1 ($p)"; fi; rm -f "$1"; }
hvexec() { ip netns exec $NS unshare -m --propagation private sh -c 'mount --bind "$0" /run/openvswitch && exec "$@"' "$D" "$@"; }
case "${1:-}" in
start)
  mkdir -p $D
  ip netns list | grep -qx "$NS\( .*\)\?" || { ip netns add $NS; ip -n $NS link set lo up; }
  export OVS_RUNDIR=$D OVS_DBDIR=$D OVS_LOGDIR=$D
  if ! alive $D/ovsdb-server.pid; then
    [ -e $D/conf.db ] || ovsdb-tool create $D/conf.db /usr/share/openvswitch/vswitch.ovsschema
    hvexec ovsdb-server $D/conf.db --remote=punix:$D/db.sock --pidfile=$D/ovsdb-server.pid --log-file=$D/ovsdb-server.log -vconsole:off --detach --no-chdir
    ovs-vsctl --db=unix:$D/db.sock --no-wait init
  fi
  alive $D/ovs-vswitchd.pid || hvexec ovs-vswitchd unix:$D/db.sock --pidfile=$D/ovs-vswitchd.pid --log-file=$D/ovs-vswitchd.log -vconsole:off --detach --no-chdir
  unset OVS_RUNDIR OVS_DBDIR OVS_LOGDIR
  ovs-vsctl --db=unix:$D/db.sock --may-exist add-br br-phys -- set Bridge br-phys datapath_type=netdev
  mountpoint -q /run/openvswitch && { log "BUG: /run/openvswitch mounted on the host"; exit 1; }
  alive $R/refq-relay-host.pid || { (exec setsid socat "UNIX-LISTEN:$R/refq-amqp.sock,fork,unlink-early" TCP:127.0.0.1:5672) >/dev/null 2>&1 </dev/null & echo $! > $R/refq-relay-host.pid; }
  alive $R/refq-relay-ns.pid || { (exec setsid ip netns exec $NS socat TCP-LISTEN:5672,bind=127.0.0.1,fork,reuseaddr "UNIX-CONNECT:$R/refq-amqp.sock") >/dev/null 2>&1 </dev/null & echo $! > $R/refq-relay-ns.pid; }
  sleep 1
  sed -e "s|^host = .*|host = $HOST|" -e "s|^\[agent\]\$|[agent]\nroot_helper = neutron-rootwrap /etc/neutron/rootwrap.conf|" \
    "$HERE/etc/neutron/openvswitch_agent.ini" > $C$CONF/openvswitch_agent.ini
  mkdir -p $C/run/openvswitch
  if ! alive $R/refq-agent.pid; then
    (cd / && exec setsid nohup ip netns exec $NS unshare -m --propagation private sh -c \
      'mount --bind "$1" "$0/run/openvswitch" && mount -t sysfs sysfs "$0/sys" && shift && exec chroot "$0" "$@"' \
      $C $D /usr/bin/neutron-openvswitch-agent --config-file $CONF/neutron.conf --config-file $CONF/openvswitch_agent.ini \
      --log-file /var/log/neutron/refenv-quorum-ovs-agent.log) > $C/var/log/neutron/refenv-quorum-ovs-agent.stdout 2>&1 < /dev/null &
    echo $! > $R/refq-agent.pid
    log "reference agent pid $(cat $R/refq-agent.pid) host $HOST"
  fi
  for i in $(seq 1 180); do
    a=$(curl -s "http://127.0.0.1:9263/v2.0/agents?host=$HOST" | jq -r '.agents[0].alive // empty'); [ "$a" = true ] && break
    alive $R/refq-agent.pid || { tail -20 $C/var/log/neutron/refenv-quorum-ovs-agent.log; log "agent exited"; exit 1; }; sleep 1
  done
  log "reference agent $HOST alive=$a after ${i}s" ;;
check)
  set +e
  OUT=$(mktemp /tmp/refenv-mixed-smoke.XXXXXX)
  alive $R/refq-agent.pid || { log "the reference agent does not run: $0 start first"; exit 1; }
  API=http://127.0.0.1:9263/v2.0; H='X-Project-Id: smoke'; D=/run/refenv/2026.2-quorum/refovs
  api() { local m=$1 p=$2; shift 2; curl -sf -X "$m" -H "$H" -H 'Content-Type: application/json' "$API$p" "$@"; }
  BL=$(wc -l < /var/log/rabbitmq/rabbit@localhost.log)
  RL=$(wc -l < $C/var/log/neutron/refenv-quorum-ovs-agent.log)
  SL=$(cat $C/var/log/neutron/refenv-quorum-{rpc-server,api,periodic-workers}.log | wc -l)
  RELEASE=2026.2 MESSAGING=quorum HOLD=60 "$HERE/smoke.sh" > $OUT 2>&1 &
  SP=$!
  for i in $(seq 1 120); do grep -q HOLD $OUT && break; sleep 1; done
  grep -E "alive|ACTIVE|PASS|FAIL" $OUT | cut -c1-160
  NET=$(api GET "/networks?name=refenv-smoke" | jq -r '.networks[0].id')
  P=$(api POST /ports -d "{\"port\":{\"network_id\":\"$NET\",\"project_id\":\"smoke\",\"binding:host_id\":\"refhv-quorum\",\"device_owner\":\"compute:nova\",\"device_id\":\"$(uuidgen)\"}}")
  PID=$(echo "$P" | jq -r .port.id); MAC=$(echo "$P" | jq -r .port.mac_address); TAP=tap${PID:0:11}
  ip -n refq link add $TAP type veth peer name eth0r; ip -n refq link set $TAP up
  T1=$(date +%s%N)
  ovs-vsctl --db=unix:$D/db.sock -- --may-exist add-port br-int $TAP -- set Interface $TAP external_ids:iface-id=$PID \
    external_ids:attached-mac=$MAC external_ids:iface-status=active external_ids:vm-uuid=$(uuidgen)
  for i in $(seq 1 240); do st=$(api GET /ports/$PID | jq -r .port.status); [ "$st" = ACTIVE ] && break; sleep 0.25; done
  echo "reference agent's port on refhv-quorum: $st $(( ($(date +%s%N) - T1) / 1000000 )) ms after plugging"
  echo "ports of the network: $(api GET "/ports?network_id=$NET" | jq -c '[.ports[] | {host: .["binding:host_id"], status}]')"
  echo "agents: $(api GET /agents | jq -c '[.agents[] | {host, alive}]')"
  ovs-vsctl --db=unix:$D/db.sock del-port br-int $TAP; ip -n refq link del $TAP 2>/dev/null; api DELETE /ports/$PID
  wait $SP; echo "smoke rc=$?"; tail -3 $OUT | cut -c1-160
  # since the check started (the logs are appended to across runs; the agent's own stop logs an ERROR)
  n1=$(tail -n +$((RL+1)) $C/var/log/neutron/refenv-quorum-ovs-agent.log | grep -cE 'PRECONDITION|inequivalent')
  # other ERRORs are shown, not failed on: a broker restarted meanwhile (other suites on this machine
  # restart it) makes oslo log "AMQP server ... unreachable" until it reconnects
  e1=$(tail -n +$((RL+1)) $C/var/log/neutron/refenv-quorum-ovs-agent.log | grep ' ERROR ' | grep -vc 'is unreachable')
  n2=$(cat $C/var/log/neutron/refenv-quorum-{rpc-server,api,periodic-workers}.log | tail -n +$((SL+1)) | grep -cE 'PRECONDITION|inequivalent|MessagingTimeout')
  n3=$(tail -n +$((BL+1)) /var/log/rabbitmq/rabbit@localhost.log | grep -F "neutron-2026.2-quorum" | grep -cE 'precondition_failed|channel exception')
  SD=$(grep -o 'logs kept in [^)]*' $OUT | tail -1 | cut -d' ' -f4)
  n4=missing; [ -f "$SD/ovs-agent.log" ] && n4=$(grep -cE 'PRECONDITION|inequivalent|declare failed' "$SD/ovs-agent.log")
  echo "ovs-agent log ($SD/ovs-agent.log, until its stop): $n4 406/declare failures"
  echo "reference agent log: $n1 406 lines ($e1 other ERRORs besides 'AMQP server unreachable'); server logs: $n2 406/MessagingTimeout lines; broker log since the start, vhost neutron-2026.2-quorum: $n3 channel exceptions"
  [ "$st" = ACTIVE ] && grep -q PASS $OUT && [ "$n1$n2$n3$n4" = 0000 ] || { log "FAIL"; exit 1; }
  log "PASS" ;;
stop)
  helpers=$(for p in /proc/[0-9]*; do [ "$(readlink $p/root 2>/dev/null)" = "$C" ] && tr '\0' ' ' < $p/cmdline 2>/dev/null | grep -q "privsep-helper.*$CONF/openvswitch_agent.ini" && echo ${p#/proc/}; done; true)
  stop_pid $R/refq-agent.pid neutron-openvswitch-agent 20
  for p in $helpers; do [ "$(readlink /proc/$p/root 2>/dev/null)" = "$C" ] && kill -TERM $p 2>/dev/null && log "stopped privsep $p"; done
  stop_pid $R/refq-relay-ns.pid socat 5; stop_pid $R/refq-relay-host.pid socat 5
  stop_pid $D/ovs-vswitchd.pid ovs-vswitchd 10; stop_pid $D/ovsdb-server.pid ovsdb-server 10
  [ -z "$(ip netns pids $NS 2>/dev/null)" ] && ip netns del $NS 2>/dev/null && log "netns $NS deleted"
  # its row would stay, dead, in the server's agent list
  for a in $(curl -s "http://127.0.0.1:9263/v2.0/agents?host=$HOST" | jq -r '.agents[].id' 2>/dev/null); do
    curl -s -X DELETE "http://127.0.0.1:9263/v2.0/agents/$a" >/dev/null && log "agent row $a deleted"; done; true ;;
*) echo "usage: $0 start|check|stop" >&2; exit 2 ;;
esac
