#!/bin/bash
# refenv takeover.sh — ovs-agent takes over from a release's reference agent on refenv's private
# OVS of that release (release.sh agent: host refhv-<release>, netns refenv-<release>), with no
# e2e lock: N VM ports on a vxlan network (firewall on) wired by the reference, a ping every 0.1 s
# and a TCP session (a line every 0.1 s, each echoed) between two of them; the reference is
# stopped and ovs-agent started with the same --config-file files (plus [ovsagent] metrics_listen),
# in the same netns and mount namespace set-up. Prints pings lost, the TCP session's result, the
# time to ovsagent_in_sync, the time until no flow of the reference's cookies is left, and every
# port's status; then stops ovs-agent, removes what it made and starts the reference again.
#   RELEASE=2026.2 N=22 refenv/takeover.sh [path/to/ovs-agent]   (default: go build ./cmd/ovs-agent)
# Exit status 0 only if 0 pings lost, the TCP session kept, no old cookie left, every port ACTIVE.
set -euo pipefail
export PATH=/usr/local/go/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin
HERE=$(cd "$(dirname "$0")" && pwd); TOP=$(dirname "$HERE")
for _f in /proc/$$/fd/*; do _f=${_f##*/}; if [ "$_f" -gt 2 ] && [ "$_f" -lt 255 ]; then eval "exec $_f>&-"; fi; done 2>/dev/null
RELEASE=${RELEASE:-2026.2}; N=${N:-22}
. "$HERE/release.sh"; release_vars
API=http://127.0.0.1:$REFENV_API_PORT/v2.0; H='X-Project-Id: takeover'
D=/tmp/refenv-takeover-$RELEASE-$$; mkdir -p "$D"
C=$REFENV_CHROOT; NS=$REFENV_OVS_NS; HOST=$REFENV_AGENT_HOST
log() { echo "[takeover $RELEASE $(date +%T.%3N)] $*"; }
api() { local m=$1 p=$2; shift 2; curl -sf -X "$m" -H "$H" -H 'Content-Type: application/json' "$API$p" "$@"; }
ofctl() { OVS_RUNDIR=$REFENV_OVS_DIR ovs-ofctl -O OpenFlow13 "$@"; }
cookies() { local b; for b in br-int br-tun br-phys; do ofctl dump-flows $b; done | grep -o 'cookie=0x[0-9a-f]*' | sort | uniq -c; }
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }

NET=""; PORTS=(); VMNS=(); OURS=""; PINGPID=""; TCPPID=""; SRVPID=""; WATCHPID=""
cleanup() {
  set +e
  for p in $PINGPID $TCPPID $SRVPID $WATCHPID; do kill "$p" 2>/dev/null; done
  if [ -n "$OURS" ] && tr '\0' ' ' < "/proc/$OURS/cmdline" 2>/dev/null | grep -q "$D/"; then
    kill -TERM "$OURS"; for _ in $(seq 1 40); do kill -0 "$OURS" 2>/dev/null || break; sleep 0.5; done
  fi
  for i in "${!PORTS[@]}"; do
    hvsctl --if-exists del-port br-int "tap${PORTS[$i]:0:11}"; ip -n "$NS" link del "tap${PORTS[$i]:0:11}" 2>/dev/null
    ip netns del "${VMNS[$i]}" 2>/dev/null; api DELETE "/ports/${PORTS[$i]}" >/dev/null
  done
  [ -n "$NET" ] && api DELETE "/networks/$NET" >/dev/null
  log "cleaned up; starting the reference agent again"
  release_agent >/dev/null 2>&1 || log "reference agent did not come back: RELEASE=$RELEASE refenv/release.sh agent"
  log "files kept in $D"
}
trap cleanup EXIT

BIN=${1:-}
if [ -z "$BIN" ]; then BIN=$D/ovs-agent; (cd "$TOP" && CGO_ENABLED=0 go build -o "$BIN" ./cmd/ovs-agent); fi
release_agent   # the reference, alive (started if it was not)
log "neutron $(release_version), reference agent pid $(cat "$RRUN/ovs-agent.pid") as $HOST"

# ---- N ports wired by the reference
NET=$(api POST /networks -d '{"network":{"name":"refenv-takeover","project_id":"takeover"}}' | jq -r .network.id)
api POST /subnets -d "{\"subnet\":{\"network_id\":\"$NET\",\"ip_version\":4,\"cidr\":\"10.253.0.0/24\",\"gateway_ip\":null,\"enable_dhcp\":false,\"project_id\":\"takeover\"}}" >/dev/null
MTU=$(api GET "/networks/$NET" | jq -r .network.mtu)
IPS=()
T0=$(date +%s%N)
for i in $(seq 0 $((N - 1))); do
  P=$(api POST /ports -d "{\"port\":{\"network_id\":\"$NET\",\"name\":\"tk$i\",\"project_id\":\"takeover\",\"binding:host_id\":\"$HOST\",\"device_owner\":\"compute:nova\",\"device_id\":\"$(uuidgen)\"}}")
  id=$(jq -r .port.id <<<"$P"); mac=$(jq -r .port.mac_address <<<"$P"); ip=$(jq -r '.port.fixed_ips[0].ip_address' <<<"$P")
  PORTS+=("$id"); IPS+=("$ip"); vm=tk$$-$i; VMNS+=("$vm"); tap=tap${id:0:11}
  ip netns add "$vm"
  ip -n "$NS" link add "$tap" mtu "$MTU" type veth peer name eth0 mtu "$MTU" netns "$vm"
  ip -n "$vm" link set eth0 address "$mac"; ip -n "$vm" addr add "$ip/24" dev eth0
  ip -n "$vm" link set lo up; ip -n "$vm" link set eth0 up; ip -n "$NS" link set "$tap" up
  # userspace datapath and veth: no TX checksum offload, or TCP breaks
  ip netns exec "$vm" ethtool -K eth0 tx off >/dev/null 2>&1; ip netns exec "$NS" ethtool -K "$tap" tx off >/dev/null 2>&1
  hvsctl -- --may-exist add-port br-int "$tap" -- set Interface "$tap" external_ids:iface-id="$id" \
    external_ids:attached-mac="$mac" external_ids:iface-status=active external_ids:vm-uuid="$(uuidgen)"
done
active() { api GET "/ports?network_id=$NET&fields=status" | jq -r '[.ports[] | select(.status=="ACTIVE")] | length'; }
for _ in $(seq 1 600); do [ "$(active)" = "$N" ] && break; sleep 0.5; done
[ "$(active)" = "$N" ] || { log "FAIL: only $(active) of $N ports ACTIVE under the reference"; exit 1; }
log "$N ports plugged and ACTIVE under the reference after $(ms $T0) ms"
reach=0
for _ in $(seq 1 60); do ip netns exec "${VMNS[0]}" ping -c 1 -W 1 "${IPS[1]}" >/dev/null && { reach=1; break; }; done
[ $reach = 1 ] || { log "FAIL: vm0 does not reach vm1 under the reference"; exit 1; }

# ---- traffic: ping and a TCP session vm0 -> vm1
ip netns exec "${VMNS[1]}" socat TCP-LISTEN:5010,fork,reuseaddr EXEC:cat > /dev/null 2>&1 & SRVPID=$!
cat > "$D/tcpsess.py" <<'EOF'
import socket, sys, time, signal
host, port, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
stop = False
def h(*_):
    global stop; stop = True
signal.signal(signal.SIGTERM, h)
for _ in range(30):
    try:
        s = socket.create_connection((host, port), timeout=3); break
    except OSError:
        time.sleep(0.2)
s.settimeout(3)
sent = got = 0; fails = []; maxrtt = 0.0; buf = b""
while not stop:
    sent += 1; msg = b"seq-%d\n" % sent; t = time.time()
    try:
        s.sendall(msg)
        while b"\n" not in buf:
            d = s.recv(4096)
            if not d: raise OSError("closed")
            buf += d
        line, buf = buf.split(b"\n", 1)
        if line + b"\n" != msg: fails.append("got %r want %r" % (line, msg))
        else: got += 1; maxrtt = max(maxrtt, time.time() - t)
    except OSError as e:
        fails.append("%s: %s" % (time.strftime("%T"), e)); break
    time.sleep(0.1)
open(out, "w").write("sent %d echoed %d max_rtt_ms %.0f failures %d %s\n" % (sent, got, maxrtt * 1000, len(fails), fails[:3]))
EOF
ip netns exec "${VMNS[0]}" python3 "$D/tcpsess.py" "${IPS[1]}" 5010 "$D/tcp.txt" & TCPPID=$!
ip netns exec "${VMNS[0]}" ping -i 0.1 -W 1 "${IPS[1]}" > "$D/ping.txt" 2>&1 & PINGPID=$!
# every port's status, polled through the swap: anything but ACTIVE is written down
( while :; do api GET "/ports?network_id=$NET&fields=id&fields=status" | jq -r '.ports[] | select(.status!="ACTIVE") | "\(.id) \(.status)"' \
    | sed "s/^/$(date +%T.%3N) /" >> "$D/status.txt"; sleep 0.2; done ) & WATCHPID=$!
sleep 2
OLD=$(cookies | awk '{print $2}' | sort -u | tr '\n' ' ')
log "reference flows by cookie: $(cookies | awk '{print $2"="$1}' | tr '\n' ' ')"

# ---- the swap
TS=$(date +%s%N); release_ref_stop > "$D/ref-stop.txt" 2>&1
log "reference stopped after $(ms $TS) ms"
METRICS=127.0.0.1:$((19000 + $$ % 1000))
cp "$C/etc/neutron/refenv/openvswitch_agent.ini" "$D/openvswitch_agent.ini"
printf '\n# ovsagent only (the reference ignores unknown sections)\n[ovsagent]\nmetrics_listen = %s\n' "$METRICS" >> "$D/openvswitch_agent.ini"
T1=$(date +%s%N)
(cd / && exec setsid ip netns exec "$NS" unshare -m --propagation private sh -c 'mount --bind "$0" /run/openvswitch && exec "$@"' \
   "$REFENV_OVS_DIR" "$BIN" --config-file "$C/etc/neutron/refenv/neutron.conf" --config-file "$D/openvswitch_agent.ini" \
   --log-file "$D/ovs-agent.log") > "$D/ovs-agent.stdout" 2>&1 < /dev/null &
OURS=$!
insync=""; clean=""
for _ in $(seq 1 1200); do
  if [ -z "$insync" ] && ip netns exec "$NS" curl -s "http://$METRICS/metrics" 2>/dev/null | grep -q '^ovsagent_in_sync 1'; then insync=$(ms $T1); fi
  if [ -z "$clean" ]; then
    # flows still carrying one of the reference's cookies (grep -c exits 1 on 0: no set -e here)
    left=$(for b in br-int br-tun br-phys; do ofctl dump-flows $b; done | grep -cF "$(tr ' ' '\n' <<<"$OLD" | grep . | sed 's/$/,/')" || true)
    [ "$left" = 0 ] && clean=$(ms $T1)
  fi
  [ -n "$insync" ] && [ -n "$clean" ] && break
  kill -0 "$OURS" 2>/dev/null || { tail -20 "$D/ovs-agent.log"; log "FAIL: ovs-agent exited"; exit 1; }
  sleep 0.05
done
log "ovs-agent pid $OURS: in sync ${insync:-never} ms after start, reference cookies gone after ${clean:-never} ms"
sleep 3
kill -INT "$PINGPID"; wait "$PINGPID" 2>/dev/null || true; PINGPID=""
kill -TERM "$TCPPID"; wait "$TCPPID" 2>/dev/null || true; TCPPID=""
kill "$WATCHPID"; WATCHPID=""
# lost = sequence numbers missing up to the last reply (the one request in flight when ping is
# interrupted is not a loss: seen as "158 transmitted, 157 received" with no gap)
recv=$(grep -c 'icmp_seq=' "$D/ping.txt" || true)
sent=$(grep -o 'icmp_seq=[0-9]*' "$D/ping.txt" | tail -1 | cut -d= -f2); sent=${sent:-0}
TCP=$(cat "$D/tcp.txt" 2>/dev/null || echo "no result")
NONACTIVE=$(sort -u "$D/status.txt" 2>/dev/null | wc -l)
log "ping across the swap: $sent sent up to the last reply, $recv received, lost $((sent - recv)) ($(grep 'packets transmitted' "$D/ping.txt"))"
log "TCP session: $TCP"
log "port status polls: $NONACTIVE non-ACTIVE observations; now $(active) of $N ACTIVE"
log "flows by cookie after: $(cookies | awk '{print $2"="$1}' | tr '\n' ' ')"
ok=1
[ $((sent - recv)) = 0 ] && [ "$sent" -ge 20 ] || ok=0
grep -q 'failures 0 ' <<<"$TCP" || ok=0
[ -n "$clean" ] && [ -n "$insync" ] && [ "$NONACTIVE" = 0 ] && [ "$(active)" = "$N" ] || ok=0
if [ $ok = 1 ]; then log "PASS: takeover from the $RELEASE reference ($(release_version)), $N ports"; else log "FAIL (files in $D)"; exit 1; fi
