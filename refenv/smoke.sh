#!/bin/bash
# refenv smoke.sh — ovs-agent against one release's server, on a private Open vSwitch (its own
# ovsdb-server and ovs-vswitchd in netns "rsmoke-<n>", datapath netdev): the agent comes alive, a
# VM port on a vxlan network turns ACTIVE. Touches neither the system OVS nor host hv1, so it needs
# no e2e lock. Prints the server's version and the times.
#   RELEASE=2026.2 refenv/smoke.sh [path/to/ovs-agent]   (default: go build ./cmd/ovs-agent)
#   MESSAGING=quorum: against that messaging variant's server (release.sh), the agent with the
#     same [oslo_messaging_rabbit] options ($REFENV_MESSAGING); afterwards the broker's log is
#     searched for channel errors on that vhost since the start
#   HOLD=SECONDS keeps the agent running that long after PASS (another agent on the same vhost
#     can be checked beside it), then cleans up
set -euo pipefail
export PATH=/usr/local/go/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin
HERE=$(cd "$(dirname "$0")" && pwd); TOP=$(dirname "$HERE")
# Descriptors above 2 a caller left open (`flock LOCK setup.sh` passes its locked fd on) must not
# reach the daemons started here: they outlive the caller and would hold its lock (seen: a
# neutron-server holding /tmp/ovsagent-e2e.lock's fd 3, every e2e run waiting). 255 is bash's.
for _f in /proc/$$/fd/*; do _f=${_f##*/}; if [ "$_f" -gt 2 ] && [ "$_f" -lt 255 ]; then eval "exec $_f>&-"; fi; done 2>/dev/null
RELEASE=${RELEASE:-zed}
if [ "$RELEASE" = zed ]; then
  PORT=9696; TURL=rabbit://guest:guest@127.0.0.1:5672/; VERSION=$(dpkg-query -W -f '${Version}' python3-neutron)
else
  eval "$(RELEASE=$RELEASE "$HERE/release.sh" env)"; PORT=$REFENV_API_PORT; TURL=$REFENV_TRANSPORT_URL; VERSION=$REFENV_VERSION
fi
MSG=${REFENV_MESSAGING:-}
[ -z "${MESSAGING:-}" ] || [ -n "$MSG" ] || { echo "smoke.sh: MESSAGING=$MESSAGING needs a chroot RELEASE" >&2; exit 2; }
API=http://127.0.0.1:$PORT/v2.0; H='X-Project-Id: smoke'
N=$$; NS=rsmoke-$N; HOST=hvsmoke-$N; D=/tmp/refenv-smoke-$N
mkdir -p "$D"
log() { echo "[smoke $RELEASE $(date +%T.%3N)] $*"; }
api() { local m=$1 p=$2; shift 2; curl -sf -X "$m" -H "$H" -H 'Content-Type: application/json' "$API$p" "$@"; }
OVSENV=(env OVS_RUNDIR="$D" OVS_DBDIR="$D" OVS_LOGDIR="$D")
vsctl() { "${OVSENV[@]}" ovs-vsctl --db="unix:$D/db.sock" "$@"; }
AGENT_PID=""; NET=""; PORTID=""
cleanup() {
  set +e
  [ -n "$PORTID" ] && api DELETE "/ports/$PORTID" >/dev/null
  [ -n "$NET" ] && api DELETE "/networks/$NET" >/dev/null
  if [ -n "$AGENT_PID" ] && tr '\0' ' ' < "/proc/$AGENT_PID/cmdline" 2>/dev/null | grep -q "$D/"; then
    kill -TERM "$AGENT_PID"; for _ in $(seq 1 20); do kill -0 "$AGENT_PID" 2>/dev/null || break; sleep 0.5; done
  fi
  for d in ovs-vswitchd ovsdb-server; do
    [ -s "$D/$d.pid" ] && kill -TERM "$(cat "$D/$d.pid")" 2>/dev/null
  done
  sleep 1; ip netns del "$NS" 2>/dev/null
  # the agent's row would stay, dead, in the server's agent list
  for a in $(api GET "/agents?host=$HOST" | jq -r '.agents[].id'); do api DELETE "/agents/$a" >/dev/null; done
  log "cleaned up (logs kept in $D)"
}
trap cleanup EXIT

BIN=${1:-}
if [ -z "$BIN" ]; then BIN=$D/ovs-agent; (cd "$TOP" && CGO_ENABLED=0 go build -o "$BIN" ./cmd/ovs-agent); fi
log "neutron $VERSION at $API, transport_url $TURL, host $HOST${MSG:+, [oslo_messaging_rabbit] $MSG}"
BROKER_LOG=$(ls -t /var/log/rabbitmq/rabbit@*.log 2>/dev/null | head -1 || true)
BROKER_LINES=$( [ -n "$BROKER_LOG" ] && wc -l < "$BROKER_LOG" || echo 0)

# private OVS in its own netns (netdev bridges make tap devices named after the bridges)
ip netns add "$NS"; ip -n "$NS" link set lo up
"${OVSENV[@]}" ovsdb-tool create "$D/conf.db" /usr/share/openvswitch/vswitch.ovsschema
"${OVSENV[@]}" ip netns exec "$NS" ovsdb-server "$D/conf.db" --remote="punix:$D/db.sock" --pidfile="$D/ovsdb-server.pid" \
  --unixctl="$D/ovsdb-server.ctl" --log-file="$D/ovsdb-server.log" -vconsole:off --detach --no-chdir
vsctl --no-wait init
"${OVSENV[@]}" ip netns exec "$NS" ovs-vswitchd "unix:$D/db.sock" --pidfile="$D/ovs-vswitchd.pid" \
  --unixctl="$D/ovs-vswitchd.ctl" --log-file="$D/ovs-vswitchd.log" -vconsole:off --detach --no-chdir
vsctl --may-exist add-br br-phys -- set Bridge br-phys datapath_type=netdev

printf '[DEFAULT]\ntransport_url = %s\n[agent]\nreport_interval = 30\n' "$TURL" > "$D/neutron.conf"
if [ -n "$MSG" ]; then
  # the server's options; hostname = the agent's host for the queue manager's names (another
  # agent on this machine would otherwise get the same ones)
  { echo "[oslo_messaging_rabbit]"; tr ',' '\n' <<< "$MSG" | sed 's/=/ = /'
    case ",$MSG," in *,use_queue_manager=true,*) echo "hostname = $HOST" ;; esac; } >> "$D/neutron.conf"
fi
sed -e "s|^host = .*|host = $HOST|" -e "s|^ovsdb_connection = .*|ovsdb_connection = unix:$D/db.sock|" \
  -e '/^of_listen_/d' "$HERE/etc/neutron/openvswitch_agent.ini" > "$D/openvswitch_agent.ini"
T0=$(date +%s%N)
("${OVSENV[@]}" setsid "$BIN" --config-file "$D/neutron.conf" --config-file "$D/openvswitch_agent.ini" \
   --log-file "$D/ovs-agent.log") < /dev/null > "$D/ovs-agent.stdout" 2>&1 &
AGENT_PID=$!
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
alive=""
for _ in $(seq 1 120); do
  alive=$(api GET "/agents?host=$HOST" | jq -r '.agents[0].alive // empty' || true)
  [ "$alive" = true ] && break; sleep 0.5
done
[ "$alive" = true ] || { tail -20 "$D/ovs-agent.log"; log "FAIL: agent $HOST not alive"; exit 1; }
log "agent alive $(ms $T0) ms after start: $(api GET "/agents?host=$HOST" | jq -c '.agents[0] | {binary, agent_type, tunnel_types: .configurations.tunnel_types}')"

NET=$(api POST /networks -d '{"network":{"name":"refenv-smoke","project_id":"smoke"}}' | jq -r .network.id)
api POST /subnets -d "{\"subnet\":{\"network_id\":\"$NET\",\"ip_version\":4,\"cidr\":\"10.251.0.0/24\",\"project_id\":\"smoke\"}}" >/dev/null
P=$(api POST /ports -d "{\"port\":{\"network_id\":\"$NET\",\"project_id\":\"smoke\",\"binding:host_id\":\"$HOST\",\"device_owner\":\"compute:nova\",\"device_id\":\"$(uuidgen)\"}}")
PORTID=$(echo "$P" | jq -r .port.id); MAC=$(echo "$P" | jq -r .port.mac_address)
log "port $PORTID vif_type $(echo "$P" | jq -r '.port["binding:vif_type"]')"
TAP=tap${PORTID:0:11}
ip -n "$NS" link add "$TAP" type veth peer name eth0s; ip -n "$NS" link set "$TAP" up
T1=$(date +%s%N)
vsctl -- --may-exist add-port br-int "$TAP" -- set Interface "$TAP" external_ids:iface-id="$PORTID" \
  external_ids:attached-mac="$MAC" external_ids:iface-status=active external_ids:vm-uuid="$(uuidgen)"
st=""
for _ in $(seq 1 120); do
  st=$(api GET "/ports/$PORTID" | jq -r .port.status); [ "$st" = ACTIVE ] && break; sleep 0.25
done
[ "$st" = ACTIVE ] || { tail -20 "$D/ovs-agent.log"; log "FAIL: port $st"; exit 1; }
log "port ACTIVE $(ms $T1) ms after plugging; br-int flows: $("${OVSENV[@]}" ovs-ofctl -O OpenFlow13 dump-flows br-int | grep -c cookie)"
if [ -n "$MSG" ]; then
  log "broker queues of the agent: $(rabbitmqctl -q list_queues -p "$REFENV_VHOST" name type durable 2>/dev/null | grep -F "$HOST" | tr '\t\n' ' ;')"
  if [ -n "$BROKER_LOG" ]; then
    errs=$(tail -n +"$((BROKER_LINES + 1))" "$BROKER_LOG" | grep -F "vhost '$REFENV_VHOST'" | grep -E 'PRECONDITION_FAILED|channel error|operation [a-z.]+ caused a channel exception' || true)
    [ -z "$errs" ] || { echo "$errs" | head -5; log "FAIL: channel errors on vhost $REFENV_VHOST in $BROKER_LOG"; exit 1; }
    log "no channel error on vhost $REFENV_VHOST in $BROKER_LOG since the start"
  fi
  grep -E ' ERROR |PRECONDITION' "$D/ovs-agent.log" | head -5 && { log "FAIL: errors in the agent's log"; exit 1; }
fi
log "PASS: neutron $VERSION ($RELEASE${MSG:+, MESSAGING=$MESSAGING})"
if [ "${HOLD:-0}" -gt 0 ]; then log "HOLD: agent pid $AGENT_PID stays $HOLD s (log $D/ovs-agent.log)"; sleep "$HOLD"; fi
