#!/bin/bash
# refenv dvr_ovsagent.sh — ovs-agent with enable_distributed_routing in place of the reference
# agent on hypervisor HV (default 2) of refenv/dvr.sh's NHV=2 environment (issue 16):
#   up + scenario (reference agents on every host, pings), then on hvHV: the reference OVS agent
#   stopped (its L3 agent keeps running) and ovs-agent started with that host's --config-file set
#   in its netns, and dvr.sh check's pings (east-west across hosts, SNAT, floating IP) through
#   ovs-agent's flows. At the end ovs-agent stops and the reference agent starts again on hvHV
#   (the environment stays up: dvr.sh down).
#   TAKEOVER=1 (default): a takeover — the reference's flows stay in place, ovs-agent adopts and
#   replaces them, under a continuous east-west ping (vm1 on hv1 -> vm2 on hv2, ping -i 0.1) and a
#   TCP echo session on the same path (a line every 100 ms); reports pings lost, the session, and
#   that no flow with the reference's cookies is left. TAKEOVER=0: the reference's flows are
#   deleted before ovs-agent starts (a start from scratch, with a gap).
#   RELEASE=2026.2 [TAKEOVER=0|1] refenv/dvr_ovsagent.sh [path/to/ovs-agent]
# Run it under the e2e lock: flock -o /tmp/ovsagent-e2e.lock refenv/dvr_ovsagent.sh BIN
set -euo pipefail
export PATH=/usr/local/go/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin
HERE=$(cd "$(dirname "$0")" && pwd); TOP=$(dirname "$HERE")
for _f in /proc/$$/fd/*; do _f=${_f##*/}; if [ "$_f" -gt 2 ] && [ "$_f" -lt 255 ]; then eval "exec $_f>&-"; fi; done 2>/dev/null
export RELEASE=${RELEASE:-2026.2} NHV=2
HVN=${HV:-2}; unset HV
TAKEOVER=${TAKEOVER:-1}
D=/tmp/refenv-dvr-ovsagent-$RELEASE-$$; mkdir -p "$D"
log() { echo "[dvr-ovsagent $(date +%T.%3N)] $*"; }
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
BIN=${1:-}
if [ -z "$BIN" ]; then BIN=$D/ovs-agent; (cd "$TOP" && CGO_ENABLED=0 go build -o "$BIN" ./cmd/ovs-agent); fi

"$HERE/dvr.sh" up
# the scenario's pings right after the router is wired: SNAT on the network node may still settle
"$HERE/dvr.sh" scenario || { log "scenario's pings failed; dvr.sh check once more in 10 s"; sleep 10; "$HERE/dvr.sh" check; }
eval "$(VARIANT=dvr HV=$HVN "$HERE/release.sh" env)"
C=$REFENV_CHROOT; NS=$REFENV_OVS_NS
ofctl() { OVS_RUNDIR=$REFENV_OVS_DIR ovs-ofctl -O OpenFlow13 "$@"; }
OURS=""; PINGP=""; ECHOP=""; SESSP=""
# stop a process we started (setsid: its own group), its command line checked first
stopbg() { [ -n "$1" ] && tr '\0' ' ' < "/proc/$1/cmdline" 2>/dev/null | grep -q "$2" && kill -"${3:-TERM}" -- -"$1" 2>/dev/null; return 0; }
cleanup() {
  set +e
  stopbg "$PINGP" "ping -i 0.1" INT; stopbg "$SESSP" "$D/tcpsession.py"; stopbg "$ECHOP" "TCP-LISTEN:5009"
  if [ -n "$OURS" ] && tr '\0' ' ' < "/proc/$OURS/cmdline" 2>/dev/null | grep -q "$D/"; then
    kill -TERM "$OURS"; for _ in $(seq 1 40); do kill -0 "$OURS" 2>/dev/null || break; sleep 0.5; done
  fi
  log "starting the reference agent on hv$HVN again"
  VARIANT=dvr HV=$HVN REFENV_AGENT_SET="agent.enable_distributed_routing=True agent.l2_population=True agent.arp_responder=True ovs.local_ip=172.31.254.$HVN" \
    REFENV_UNDERLAY=172.31.254.$HVN/24 "$HERE/release.sh" agent > "$D/ref-restart.txt" 2>&1 || log "reference did not come back (see $D/ref-restart.txt)"
  log "files kept in $D"
}
trap cleanup EXIT

METRICS=127.0.0.1:$((19000 + $$ % 1000))
INI=$C/etc/neutron/refenv-dvr/openvswitch_agent-hv$HVN.ini
cp "$INI" "$D/openvswitch_agent.ini"
printf '\n# ovsagent only\n[ovsagent]\nmetrics_listen = %s\n' "$METRICS" >> "$D/openvswitch_agent.ini"
# ovs-agent in hvHV's netns with the hypervisor's OVS directory on /run/openvswitch
inhv() { (cd / && exec ip netns exec "$NS" unshare -m --propagation private sh -c 'mount --bind "$0" /run/openvswitch && exec "$@"' "$REFENV_OVS_DIR" "$@"); }
if [ "$TAKEOVER" = 1 ]; then
  . "/run/refenv/$RELEASE-dvr/dvr.env"   # vm2_IP (dvr.sh scenario)
  VM1=$RELEASE-dvr-vm1; VM2=$RELEASE-dvr-vm2
  # what ovs-agent would do, the reference still running (its refusals would show here)
  if inhv "$BIN" takeover --dry-run --config-file "$C/etc/neutron/refenv-dvr/neutron.conf" --config-file "$D/openvswitch_agent.ini" > "$D/dry-run.txt" 2>&1; then
    log "takeover --dry-run on hv$HVN: $(grep '^summary:' "$D/dry-run.txt")"
  else
    log "FAIL: takeover --dry-run on hv$HVN refused: $(tail -3 "$D/dry-run.txt")"; exit 1
  fi
  # east-west under the swap: vm1 (hv1, subnet A) -> vm2 (hv$HVN, subnet B) through the distributed router
  setsid ip netns exec "$VM1" ping -i 0.1 -W 1 "$vm2_IP" > "$D/ping.txt" 2>&1 < /dev/null & PINGP=$!
  setsid ip netns exec "$VM2" socat "TCP-LISTEN:5009,bind=$vm2_IP,fork,reuseaddr" EXEC:cat > "$D/echo.txt" 2>&1 < /dev/null & ECHOP=$!
  cat > "$D/tcpsession.py" <<'PY'
import socket, sys, time, os
ip, stop = sys.argv[1], sys.argv[2]
for _ in range(30):
    try:
        s = socket.create_connection((ip, 5009), timeout=3); break
    except OSError:
        time.sleep(0.2)
else:
    print("tcp: no connection"); sys.exit(1)
s.settimeout(3); f = s.makefile("r"); sent = got = 0; fails = []; worst = 0.0
while not os.path.exists(stop):
    sent += 1; m = "seq-%d" % sent; t = time.time()
    try:
        s.sendall((m + "\n").encode()); l = f.readline().strip()
        if l == m: got += 1; worst = max(worst, time.time() - t)
        else: fails.append("%s got %r" % (m, l))
    except OSError as e:
        fails.append("%s %s" % (m, e))
        if not isinstance(e, socket.timeout): break
    time.sleep(0.1)
print("tcp: sent %d got %d failures %d max_rtt_ms %d %s" % (sent, got, len(fails), worst * 1000, "; ".join(fails[:3])))
PY
  sleep 1
  setsid ip netns exec "$VM1" python3 "$D/tcpsession.py" "$vm2_IP" "$D/tcp.stop" > "$D/tcp.txt" 2>&1 < /dev/null & SESSP=$!
  sleep 3
  grep -q 'icmp_seq=' "$D/ping.txt" || { log "FAIL: vm1 -> vm2 does not answer before the swap"; exit 1; }
fi
TS=$(date +%s%N); VARIANT=dvr HV=$HVN "$HERE/release.sh" ref-stop > "$D/ref-stop.txt" 2>&1
log "hv$HVN reference OVS agent stopped after $(ms $TS) ms (L3 agent kept)"
for b in br-int br-tun br-phys; do
  ofctl dump-flows "$b" > "$D/ref-flows-$b.txt"
  # TAKEOVER=0: from scratch (the reference's flows gone, traffic with them until ovs-agent's are in)
  [ "$TAKEOVER" = 1 ] || ofctl del-flows "$b"
done
T1=$(date +%s%N)
(cd / && exec setsid ip netns exec "$NS" unshare -m --propagation private sh -c 'mount --bind "$0" /run/openvswitch && exec "$@"' \
   "$REFENV_OVS_DIR" "$BIN" --config-file "$C/etc/neutron/refenv-dvr/neutron.conf" --config-file "$D/openvswitch_agent.ini" \
   --log-file "$D/ovs-agent.log") > "$D/ovs-agent.stdout" 2>&1 < /dev/null &
OURS=$!
insync=""
for _ in $(seq 1 1200); do
  if ip netns exec "$NS" curl -s "http://$METRICS/metrics" 2>/dev/null | grep -q '^ovsagent_in_sync 1'; then insync=$(ms $T1); break; fi
  kill -0 "$OURS" 2>/dev/null || { tail -30 "$D/ovs-agent.log" "$D/ovs-agent.stdout" 2>/dev/null || true; log "FAIL: ovs-agent exited"; exit 1; }
  sleep 0.05
done
log "ovs-agent pid $OURS on hv$HVN: in sync ${insync:-never} ms after start"
for b in br-int br-tun br-phys; do ofctl dump-flows "$b" --no-stats > "$D/ours-flows-$b.txt"; done
if [ "$TAKEOVER" = 1 ]; then
  # the reference's cookies (every bridge) left anywhere once ovs-agent is in sync
  refc=$(cat "$D"/ref-flows-br-*.txt | grep -oE 'cookie=0x[0-9a-f]+' | sort -u)
  left=$(cat "$D"/ours-flows-br-*.txt | grep -cFf <(printf '%s,\n' $refc) || true)
  log "flows with one of the reference's $(wc -w <<<"$refc") cookies left on hv$HVN after in sync: $left"
  [ "$left" = 0 ] || grep -hFf <(printf '%s,\n' $refc) "$D"/ours-flows-br-*.txt | head -5
fi
log "ovs-agent's DVR flows on hv$HVN: br-int t1-4 $(grep -cE 'table=[1-4],' "$D/ours-flows-br-int.txt" || true), br-tun t1/t9 $(grep -cE 'table=(1|9),' "$D/ours-flows-br-tun.txt" || true), br-phys t1-3 $(grep -cE 'table=[1-3],' "$D/ours-flows-br-phys.txt" || true); reference had $(grep -cE 'table=[1-4],' "$D/ref-flows-br-int.txt" || true) / $(grep -cE 'table=(1|9),' "$D/ref-flows-br-tun.txt" || true) / $(grep -cE 'table=[1-3],' "$D/ref-flows-br-phys.txt" || true)"
# the reference's flows on this host and ours, cookies and stats dropped: equal outside the
# firewall tables (70-99 on br-int, conj ids are numbered differently) and the learnt table-20 flows
norm() { sed -E 's/^[[:space:]]+//; s/cookie=0x[0-9a-f]+, //; s/(duration|n_packets|n_bytes|idle_age|hard_age)=[^,]*, //g; s/^table=0, //' "$1" \
  | grep -vE '^(OFPST|NXST)|hard_timeout=|^table=(7[0-9]|8[0-9]|9[0-9]),' | sort; }
# The reference's own defect (docs/dvr.md, defect 1): a removed router interface leaves its
# br-int table-3 flow, output to a port that is gone; ovs-agent has none. Counted apart.
ports=" $(ofctl show br-int | sed -nE 's/^ *([0-9]+)\(.*/\1/p' | tr '\n' ' ') "
ndiff=0
for b in br-int br-tun br-phys; do
  comm -3 <(norm "$D/ref-flows-$b.txt") <(norm "$D/ours-flows-$b.txt") > "$D/diff-$b.txt"
  stale=0; n=0
  while IFS= read -r l; do
    p=$(sed -nE 's/^table=3, priority=5,.*output:([0-9]+)$/\1/p' <<<"$l")
    if [ "$b" = br-int ] && [ -n "$p" ] && [[ "$l" != $'\t'* ]] && [[ "$ports" != *" $p "* ]]; then stale=$((stale + 1)); else n=$((n + 1)); fi
  done < "$D/diff-$b.txt"
  log "$b: $n lines differ from the reference's (outside firewall tables and learnt flows; $D/diff-$b.txt), $stale stale reference table-3 flows to gone ports"
  ndiff=$((ndiff + n))
done
agentrow() { curl -s "http://127.0.0.1:$REFENV_API_PORT/v2.0/agents?host=$REFENV_AGENT_HOST&binary=neutron-openvswitch-agent" -H 'X-Roles: admin' -H 'X-Project-Id: demo' \
  | jq -c '.agents[] | {alive, in_distributed_mode: .configurations.in_distributed_mode, enable_distributed_routing: .configurations.enable_distributed_routing, arp_responder_enabled: .configurations.arp_responder_enabled}' 2>&1 || true; }
log "API agent row at in-sync: $(agentrow)"
if "$HERE/dvr.sh" check > "$D/check.txt" 2>&1; then
  cat "$D/check.txt"; log "PASS: dvr.sh check through ovs-agent on hv$HVN"
else
  cat "$D/check.txt"; log "FAIL: dvr.sh check through ovs-agent on hv$HVN"; exit 1
fi
# report_state: in_distributed_mode once this host's DVR MAC is known (the next report, report_interval)
row=""; for _ in $(seq 1 45); do row=$(agentrow); grep -q '"in_distributed_mode":true' <<<"$row" && break; sleep 1; done
log "API agent row: $row"
grep -q '"in_distributed_mode":true,"enable_distributed_routing":true,"arp_responder_enabled":true' <<<"$row" || { log "FAIL: report_state"; exit 1; }
log "PASS: report_state in distributed mode"
[ "$ndiff" = 0 ] || { log "FAIL: $ndiff flow lines differ from the reference's"; exit 1; }
log "PASS: flows equal to the reference's outside the firewall tables"
if [ "$TAKEOVER" = 1 ]; then
  touch "$D/tcp.stop"; for _ in $(seq 1 50); do kill -0 "$SESSP" 2>/dev/null || break; sleep 0.1; done
  stopbg "$PINGP" "ping -i 0.1" INT; sleep 0.5; PINGP=""
  # lost: the sequence numbers without a reply up to the last one answered (the echo in
  # flight when ping is interrupted is not lost)
  read -r sent last lost < <(awk -F'icmp_seq=' '/icmp_seq=/{split($2,a," "); got[a[1]]=1; if (a[1]>m) m=a[1]} /packets transmitted/{split($0,b," "); t=b[1]}
    END{l=0; for (i=1;i<=m;i++) if (!(i in got)) l++; print t, m, l}' "$D/ping.txt")
  log "east-west vm1 -> vm2 (ping -i 0.1) across the takeover: $lost lost of $last (transmitted $sent); $(grep -E 'transmitted' "$D/ping.txt")"
  log "$(cat "$D/tcp.txt")"
  fail=""
  [ "$left" = 0 ] || fail="$fail reference-cookies-left"
  [ "${lost:-x}" = 0 ] || fail="$fail pings-lost"
  grep -qE '^tcp: sent [0-9]+ got [0-9]+ failures 0 ' "$D/tcp.txt" && awk '{exit !($3 == $5 && $3 > 0)}' "$D/tcp.txt" || fail="$fail tcp"
  [ -z "$fail" ] || { log "FAIL: takeover:$fail"; exit 1; }
  log "PASS: takeover with 0 lost, TCP kept, no reference cookie left"
fi
exit 0
if "$HERE/dvr.sh" check > "$D/check.txt" 2>&1; then
  cat "$D/check.txt"; log "PASS: dvr.sh check through ovs-agent on hv$HVN"
else
  cat "$D/check.txt"; log "FAIL: dvr.sh check through ovs-agent on hv$HVN"; exit 1
fi
