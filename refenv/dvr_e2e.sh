#!/bin/bash
# refenv dvr_e2e.sh — issue 16's Must-show with ovs-agent as the OVS agent of every hypervisor of
# refenv/dvr.sh's NHV=3 environment (hv1 network node dvr_snat, hv2 and hv3 computes dvr; the real
# 2026.2 server variant :9265 and the real L3 agents). One environment, many steps; test/e2e
# TestDVR runs them in this order as subtests:
#
#   dvr_e2e.sh up                 NHV=3 dvr.sh up + scenario with the reference agents
#   dvr_e2e.sh ifbench N          dvr.sh ifbench N (with whatever agents run now; benchmark)
#   dvr_e2e.sh replace BIN N...   first vm1's route to vm2 checked (via subnet A's gateway, no
#                                 ICMP redirect taken); then on each hvN: `takeover --dry-run`
#                                 (refused = FAIL), replace_host (reference stopped, its flows
#                                 dumped and kept, ovs-agent BIN started over them, in sync), none
#                                 of the reference's cookies left, hvN's flows compared with the
#                                 reference's dump (outside the firewall tables); all under a
#                                 vm1 -> vm2 ping (east-west, hv2 + hv3) and a vm1 -> outside ping
#                                 (SNAT, hv2 + hv1) every 0.1 s, 0 lost, and the TCP session
#                                 (started here, kept to the end). TAKEOVER=0: a swap instead (the
#                                 reference's flows deleted before ovs-agent starts; no ping)
#   dvr_e2e.sh check              dvr.sh check (every ping of the scenario)
#   dvr_e2e.sh eastwest           vm1 (A, hv2) <-> vm2 (B, hv3): pings, the TCP session (started
#                                 here with TAKEOVER=0), the VXLAN frames on hv2's and hv1's underlay
#   dvr_e2e.sh samehost           vm3 (A, hv3) -> vm2 (B, hv3): no frame of it on hv3's underlay
#   dvr_e2e.sh northsouth         vm1 -> outside through hv1's SNAT; outside -> vm2's floating IP
#                                 through hv3's fg- port (frames seen on the outside's veths)
#   dvr_e2e.sh restart N          kill -9 of ovs-agent on hvN under a vm1 -> vm2 ping every 0.05 s,
#                                 started again: 0 lost, flows after = before, TCP session open
#   dvr_e2e.sh iface              subnet A's router interface removed / added under pings: stops /
#                                 starts, no DVR flow of A left on the ovs-agent hosts after removal
#   dvr_e2e.sh report             every host's agent row: alive, in_distributed_mode,
#                                 enable_distributed_routing, arp_responder_enabled (report_state)
#   dvr_e2e.sh tcp                the TCP session is open and echoes
#   dvr_e2e.sh tenant T           tenant networks C, D of type T (vlan: physnet1 1103/1104; gre;
#                                 geneve) added to the router and removed again: TENANT=T
#                                 refenv/dvr_tenant.sh addon (its header)
#   dvr_e2e.sh ipv6               IPv6 subnets on A and B added to the router, the VMs addressed,
#                                 the segment checks over IPv6, removed again: TENANT=vxlan
#                                 refenv/dvr_tenant.sh v6 (its header)
#   dvr_e2e.sh teardown           ovs-agents and helpers stopped (pids checked), NHV=3 dvr.sh down
#
# Each step prints "PASS: ..." / "FAIL: ..." lines and exits 1 on a failure. State in $D.
# Run under the e2e lock: flock -o /tmp/ovsagent-e2e.lock refenv/dvr_e2e.sh ...
set -euo pipefail
export PATH=/usr/local/go/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin
HERE=$(cd "$(dirname "$0")" && pwd)
# inherited descriptors closed (the daemons started here must not hold them); no redirection on
# the loop: bash would park stderr on a descriptor the loop then closes, losing every error message
_fds=$(ls /proc/$$/fd)
for _f in $_fds; do if [ "$_f" -gt 2 ] && [ "$_f" -lt 255 ] && [ -e "/proc/$$/fd/$_f" ]; then eval "exec $_f>&-"; fi; done
export RELEASE=${RELEASE:-2026.2} NHV=3
TAKEOVER=${TAKEOVER:-1}
unset HV
D=${DVR_E2E_DIR:-/tmp/refenv-dvr-e2e-$RELEASE}; mkdir -p "$D"
TCPPORT=7007
# the DVR variant's environment (hv1's): API port, database, chroot (the same for every hypervisor)
eval "$(VARIANT=dvr "$HERE/release.sh" env)"
# STATE, VMPFX, EXTNS, EXT_GW; hv, vsctl, ofctl, dvrmac, apiw, pingn, sniff, wsniff, pass, fail
# shellcheck source=lib/dvr.sh
. "$HERE/lib/dvr.sh"
log() { echo "[dvr-e2e $(date +%T.%3N)] $*"; }
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
finish() { [ "$FAILS" = 0 ] || { log "$FAILS failure(s)"; exit 1; }; exit 0; }

api() { curl -sS -f -H 'X-Project-Id: demo' -H 'X-Roles: admin' "http://127.0.0.1:$REFENV_API_PORT/v2.0$1"; }
vm() { local k=$1; shift; ip netns exec "$VMPFX$k" "$@"; }
st() { . "$STATE"; }
# a daemon of ours: setsid, pid recorded in $D/<name>.pid, killed only when /proc/<pid>/cmdline
# still names $D (where every one of them has its files)
# (or, for pings, "ping -n")
bg() { local name=$1; shift; (cd / && exec setsid "$@") > "$D/$name.out" 2>&1 < /dev/null & echo $! > "$D/$name.pid"; }
ours_alive() { local p; p=$(cat "$D/$1.pid" 2>/dev/null) || return 1; [ -n "$p" ] && tr '\0' ' ' < "/proc/$p/cmdline" 2>/dev/null | grep -qE "$D/|^ping -n "; }
kill_ours() { # name signal
  local p; p=$(cat "$D/$1.pid" 2>/dev/null) || return 0
  if ours_alive "$1"; then
    kill "-$2" "$p"; for _ in $(seq 1 40); do kill -0 "$p" 2>/dev/null || break; sleep 0.25; done
    kill -0 "$p" 2>/dev/null && kill -KILL "$p"
  fi
  rm -f "$D/$1.pid"; return 0
}
# flows of a bridge as compared: cookies and stats dropped, firewall tables (70-99: conj ids are
# numbered differently) and learnt table-20 flows out, sorted
norm() { sed -E 's/^[[:space:]]+//; s/cookie=0x[0-9a-f]+, //; s/(duration|n_packets|n_bytes|idle_age|hard_age)=[^,]*, //g; s/^table=0, //' "$1" \
  | grep -vE '^(OFPST|NXST)|hard_timeout=|^table=(7[0-9]|8[0-9]|9[0-9]),' | sort; }
hvlist() { local h; h=$(printf 'hv%s, ' "$@"); echo "${h%, }"; } # N...: "hv2, hv3"

# ---- ovs-agent in place of the reference on a hypervisor ----
ours_ini() { # N: hvN's ini (the reference's) with ovs-agent's metrics on hvN's loopback, in $D
  local n=$1
  hv "$n"
  cp "$REFENV_CHROOT/etc/neutron/refenv-dvr/openvswitch_agent$([ "$n" = 1 ] || echo "-hv$n").ini" "$D/ovs-agent-hv$n.ini"
  printf '\n# ovsagent only\n[ovsagent]\nmetrics_listen = 127.0.0.1:%s\n' "$((19170 + n))" >> "$D/ovs-agent-hv$n.ini"
}
in_hv() { # N: IN_HV = the command prefix that runs a command in hvN's netns with hvN's OVS
  # directory on /run/openvswitch (one process: each step exec's)
  hv "$1"
  IN_HV=(ip netns exec "$HVNS" unshare -m --propagation private sh -c 'mount --bind "$0" /run/openvswitch && exec "$@"' "$OVSD")
}
ours_args() { echo "--config-file $REFENV_CHROOT/etc/neutron/refenv-dvr/neutron.conf --config-file $D/ovs-agent-hv$1.ini"; }
start_ours() { # N BIN: ovs-agent as hvN's OVS agent (that host's ini), in its netns, metrics on its loopback
  local n=$1 bin=$2
  ours_ini "$n"; in_hv "$n"
  # the pid recorded is ovs-agent's (bg and IN_HV exec)
  # shellcheck disable=SC2046 # paths without blanks
  bg "ovs-agent-hv$n" "${IN_HV[@]}" "$bin" $(ours_args "$n") --log-file "$D/ovs-agent-hv$n.log"
}
dry_run() { # N BIN: ovs-agent's takeover --dry-run on hvN, its reference still running; refused = FAIL
  local n=$1 bin=$2
  ours_ini "$n"; in_hv "$n"
  # shellcheck disable=SC2046
  if (cd / && exec "${IN_HV[@]}" "$bin" takeover --dry-run $(ours_args "$n")) > "$D/dry-run-hv$n.txt" 2>&1 < /dev/null; then
    log "hv$n: takeover --dry-run: $(grep '^summary:' "$D/dry-run-hv$n.txt" || echo 'no summary line')"
  else
    fail "hv$n: takeover --dry-run refused: $(tail -3 "$D/dry-run-hv$n.txt" | tr '\n' ' ')"
  fi
}
wait_insync() { # N T0: ms from T0 until hvN's ovs-agent reports in sync (or "never")
  local n=$1
  hv "$n"
  for _ in $(seq 1 1200); do
    if ip netns exec "$HVNS" curl -s "http://127.0.0.1:$((19170 + n))/metrics" 2>/dev/null | grep -q '^ovsagent_in_sync 1'; then ms "$2"; return 0; fi
    ours_alive "ovs-agent-hv$n" || { tail -20 "$D/ovs-agent-hv$n.log" >&2 || true; echo never; return 1; }
    sleep 0.05
  done
  echo never; return 1
}
# stop_reference N..., replace_host N BIN: the reference OVS agent of hvN stopped (its L3 agent keeps running), its
# flows dumped to $D/ref-hvN-<bridge>.txt and deleted, ovs-agent started; with TAKEOVER=1 they
# are left in place for ovs-agent to take over (its DVR flows included: docs/dvr.md, Takeover).
stop_reference() { # N...: the reference OVS agents of these hosts, in parallel (each ignores SIGTERM ~20 s)
  local n t pids=""
  t=$(date +%s%N)
  for n in "$@"; do VARIANT=dvr HV=$n "$HERE/release.sh" ref-stop > "$D/ref-stop-hv$n.txt" 2>&1 & pids="$pids $!"; done
  for n in $pids; do wait "$n"; done
  log "$(hvlist "$@"): reference OVS agent stopped after $(ms "$t") ms (L3 agents kept)"
}
replace_host() { # after stop_reference
  local n=$1 bin=$2 t b
  hv "$n"
  for b in br-int br-tun br-phys; do
    ofctl dump-flows "$b" > "$D/ref-hv$n-$b.txt"
    [ "$TAKEOVER" = 1 ] || ofctl del-flows "$b"
  done
  local before; before=$(ovsrow started_at)
  t=$(date +%s%N); start_ours "$n" "$bin"
  log "hv$n: ovs-agent pid $(cat "$D/ovs-agent-hv$n.pid") in sync $(wait_insync "$n" "$t") ms after start"
  first_report "$n" "$before"
}
ovsrow() { # FIELD of $HOSTN's OVS agent row (configurations' keys by name)
  api "/agents?host=$HOSTN&binary=neutron-openvswitch-agent" | jq -r ".agents[0] | (.configurations + .) | .$1 | select(. != null)" 2>/dev/null || true
}
first_report() { # N STARTED_AT_BEFORE: ovs-agent's first report_state (a new started_at: start_flag)
  # says in_distributed_mode true, as the reference's (its DVR MAC asked for before its first
  # report; the next report is report_interval = 30 s later, so the row read now is the first's)
  local n=$1 before=$2 now=""
  for _ in $(seq 1 100); do now=$(ovsrow started_at); [ -n "$now" ] && [ "$now" != "$before" ] && break; sleep 0.2; done
  if [ -z "$now" ] || [ "$now" = "$before" ]; then fail "hv$n: no report_state with start_flag from ovs-agent within 20 s (started_at $before)"
  elif [ "$(ovsrow in_distributed_mode)" = true ]; then pass "hv$n: ovs-agent's first report_state (started_at $now) says in_distributed_mode true, as the reference's first"
  else fail "hv$n: ovs-agent's first report_state (started_at $now) says in_distributed_mode $(ovsrow in_distributed_mode), the reference's first says true"; fi
}
compare_flows() { # N: hvN's flows now against the reference's dump; ND = the differing line count
  local n=$1 b ports stale l p c m fdb
  ND=0
  hv "$n"
  ports=" $(ofctl show br-int | sed -nE 's/^ *([0-9]+)\(.*/\1/p' | tr '\n' ' ') "
  for b in br-int br-tun br-phys; do
    ofctl --no-stats dump-flows "$b" > "$D/ours-hv$n-$b.txt"
    comm -3 <(norm "$D/ref-hv$n-$b.txt") <(norm "$D/ours-hv$n-$b.txt") > "$D/diff-hv$n-$b.txt" || true
    stale=0; c=0; fdb=0
    while IFS= read -r l; do
      # the reference's defect 1 (docs/dvr.md): table-3 flows to a removed qr- port; ours has none
      p=$(sed -nE 's/^table=3, priority=5,.*output:([0-9]+)$/\1/p' <<<"$l")
      # l2pop entries (br-tun t20 unicast, t21 ARP responder) of a MAC no port has any more: the
      # reference kept them after a router interface's removal (its csnat port's), ours has none
      m=$(grep -oE 'fa:16:3e(:[0-9a-f]{2}){3}' <<<"$l" | head -1 || true)
      if [ "$b" = br-int ] && [ -n "$p" ] && [[ "$l" != $'\t'* ]] && [[ "$ports" != *" $p "* ]]; then stale=$((stale + 1))
      elif [ "$b" = br-tun ] && [[ "$l" =~ ^table=2[01], ]] && [ -n "$m" ] && [ "$(api "/ports?mac_address=$m" | jq '.ports | length')" = 0 ]; then fdb=$((fdb + 1))
      else c=$((c + 1)); fi
    done < "$D/diff-hv$n-$b.txt"
    log "hv$n $b: $c lines differ from the reference's ($D/diff-hv$n-$b.txt; < reference only, > ovs-agent only), $stale stale reference table-3 flows, $fdb stale reference l2pop flows (MAC of no port)"
    [ "$c" = 0 ] || sed 's/^/    /' "$D/diff-hv$n-$b.txt" | head -20
    ND=$((ND + c))
  done
  log "hv$n: DVR tables ovs-agent / reference: br-int t1-4 $(grep -cE 'table=[1-4],' "$D/ours-hv$n-br-int.txt" || true)/$(grep -cE 'table=[1-4],' "$D/ref-hv$n-br-int.txt" || true), br-tun t1/t9 $(grep -cE 'table=(1|9),' "$D/ours-hv$n-br-tun.txt" || true)/$(grep -cE 'table=(1|9),' "$D/ref-hv$n-br-tun.txt" || true), br-phys t1-3 $(grep -cE 'table=[1-3],' "$D/ours-hv$n-br-phys.txt" || true)/$(grep -cE 'table=[1-3],' "$D/ref-hv$n-br-phys.txt" || true)"
}

# ---- packets (sniff, wsniff, pingn: lib/dvr.sh) ----
# ping_lost FILE [FROM]: "<highest icmp_seq answered> <answers> <lost>" of a `ping -n` stopped by
# SIGINT, counting the echoes after sequence FROM (default: all): the echoes missing up to the last
# answered one, plus those sent after it but the last. ping's own count also counts the echo still
# in flight at the SIGINT (seen: 306 sent, 305 received, no sequence missing), which no agent lost.
ping_lost() { awk -v from="${2:-0}" -F'icmp_seq=' '/ bytes from .*icmp_seq=/{split($2, a, " "); s = a[1] + 0; if (s > from) n++; if (s > m) m = s}
  / packets transmitted/{t = $0 + 0} END{x = t - m - 1; if (x < 0) x = 0; printf "%d %d %d\n", m, n, m - from - n + x}' "$1"; }
# last_seq FILE: the highest icmp_seq answered so far in a running `ping -n`'s output
last_seq() { awk -F'icmp_seq=' '/ bytes from .*icmp_seq=/{split($2, a, " "); if (a[1] + 0 > m) m = a[1] + 0} END{print m + 0}' "$1"; }
qr_macs() { api "/ports?device_owner=network:router_interface_distributed" | jq -r '.ports[].mac_address'; }

tcp_start() {
  st
  if ours_alive tcp-server && ours_alive tcp-client; then return 0; fi
  bg tcp-server ip netns exec "${VMPFX}vm2" python3 "$HERE/dvr_tcpecho.py" serve "$TCPPORT" "$D/"
  sleep 0.5
  bg tcp-client ip netns exec "${VMPFX}vm1" python3 "$HERE/dvr_tcpecho.py" client "$vm2_IP" "$TCPPORT" "$D/tcp.state"
  echo "${1:?step}" > "$D/tcp.since"
}
# the session open and echoing: the echo count grows within 150 s. After an outage of the routed
# path (the router interface removed, more so the bench's three rounds of it) the session resumes
# with the sender's next retransmission, which backs off up to TCP_RTO_MAX (120 s on Linux): seen
# 3.5 min of silence after ifbench's rounds, then echoing again on the same connection
tcp_check() {
  local a b
  a=$(sed -nE 's/.*echoed=([0-9]+).*/\1/p' "$D/tcp.state" 2>/dev/null || echo 0)
  for _ in $(seq 1 300); do
    b=$(sed -nE 's/.*echoed=([0-9]+).*/\1/p' "$D/tcp.state" 2>/dev/null || echo 0)
    grep -q closed "$D/tcp.state" 2>/dev/null && break
    [ "${b:-0}" -gt "${a:-0}" ] && break
    sleep 0.5
  done
  if grep -q ' open' "$D/tcp.state" 2>/dev/null && [ "${b:-0}" -gt "${a:-0}" ]; then
    pass "TCP session vm1 -> vm2:$TCPPORT open since $(cat "$D/tcp.since"), echoing ($(cat "$D/tcp.state"))"
  else
    fail "TCP session vm1 -> vm2:$TCPPORT: $(cat "$D/tcp.state" 2>/dev/null || echo 'no state')"
  fi
}

step_up() {
  "$HERE/dvr.sh" up
  # scenario ends with dvr.sh check right after the floating IP: the SNAT namespace on hv1 may
  # still be settling (seen: vm1 -> outside 0/3, vm3 2/3); the check again before giving up
  "$HERE/dvr.sh" scenario || { log "scenario's pings failed: dvr.sh check again in 5 s"; sleep 5; "$HERE/dvr.sh" check; }
}

route_check() { # vm1's route to vm2: via subnet A's gateway, no ICMP redirect cached (else the
  # east-west traffic goes through the network node's csnat port and every later check misleads)
  local gw out
  st
  gw=$(api "/subnets/$SUBA" | jq -r .subnet.gateway_ip)
  out=$(vm vm1 ip route get "$vm2_IP" 2>&1 || true)
  log "vm1: ip route get $vm2_IP: $(tr '\n' ' ' <<<"$out")"
  if grep -q " via $gw dev eth0" <<<"$out" && ! grep -q redirected <<<"$out"; then
    pass "vm1 routes to vm2 via subnet A's gateway $gw"
  else
    fail "vm1's route to vm2 is not via subnet A's gateway $gw (an ICMP redirect taken?): $(tr '\n' ' ' <<<"$out")"
  fi
}
# the takeover's pings (TAKEOVER=1): east-west vm1 (hv2) -> vm2 (hv3) and SNAT vm1 -> outside
# (hv2 -> hv1's csnat port -> hv1's snat namespace -> br-phys), every 0.1 s
TAKEOVER_PINGS="ew snat"
takeover_pings_start() {
  st
  bg ping-takeover-ew ip netns exec "${VMPFX}vm1" ping -n -i 0.1 -W 1 "$vm2_IP"
  bg ping-takeover-snat ip netns exec "${VMPFX}vm1" ping -n -i 0.1 -W 1 "$EXT_GW"
}
takeover_pings_mark() { # the echoes answered before the first reference agent is stopped
  local k; for k in $TAKEOVER_PINGS; do last_seq "$D/ping-takeover-$k.out" > "$D/ping-takeover-$k.from"; done
}
takeover_pings_check() { # hosts: each ping stopped, 0 lost from the first reference agent's stop on
  local k r from before
  for k in $TAKEOVER_PINGS; do
    kill_ours "ping-takeover-$k" INT
    from=$(cat "$D/ping-takeover-$k.from" 2>/dev/null || echo 0)
    r=$(ping_lost "$D/ping-takeover-$k.out" "$from")
    # an echo lost before any agent was touched is the environment's (seen once: seq 4 of the SNAT
    # ping, 0.4 s after it started, under a host loaded by other tests): logged, not the takeover's
    before=$(awk -v f="$from" -F'icmp_seq=' '/ bytes from .*icmp_seq=/{split($2, a, " "); if (a[1] + 0 <= f) n++} END{print f - n}' "$D/ping-takeover-$k.out")
    log "$k ping vm1 -> $([ "$k" = ew ] && echo "vm2 $vm2_IP" || echo "outside $EXT_GW") every 0.1 s across the takeover of $1: from seq $from (the first stop) on, last answered seq, answers, lost: $r; $before lost before the stop ($(grep -E 'packets transmitted' "$D/ping-takeover-$k.out" || true))"
    [ "$(cut -d' ' -f2 <<<"$r")" -gt 50 ] && [ "$(cut -d' ' -f3 <<<"$r")" = 0 ] && pass "$k: 0 lost across the takeover of $1" || fail "$k: lost across the takeover of $1: $r"
  done
}
step_replace() {
  local bin=$1; shift
  local n hosts; hosts=$(hvlist "$@")
  route_check
  if [ "$TAKEOVER" = 1 ]; then
    # TAKEOVER=1: the reference's flows stay and ovs-agent takes them over (docs/dvr.md,
    # Takeover) under the pings: 0 lost, none of the reference's cookies left
    for n in "$@"; do dry_run "$n" "$bin"; done
    tcp_start "the takeover"
    takeover_pings_start
    sleep 1
    takeover_pings_mark
  fi
  stop_reference "$@"
  for n in "$@"; do
    replace_host "$n" "$bin"
    if ! ours_alive "ovs-agent-hv$n"; then fail "hv$n: ovs-agent exited"; continue; fi
    [ "$TAKEOVER" = 1 ] && ref_cookies_gone "$n"
    compare_flows "$n"
    [ "$ND" = 0 ] && pass "hv$n: flows equal to the reference's outside the firewall tables" || fail "hv$n: $ND flow lines differ from the reference's"
  done
  if [ "$TAKEOVER" = 1 ]; then
    sleep 2
    takeover_pings_check "$hosts"
    tcp_check
  fi
}
ref_cookies_gone() { # N: none of the reference's cookies (its dump before the takeover) left on hvN's bridges
  local n=$1 b left=0 refc c
  hv "$n"
  for b in br-int br-tun br-phys; do
    refc=$(grep -oE 'cookie=0x[0-9a-f]+' "$D/ref-hv$n-$b.txt" | sort -u)
    [ -n "$refc" ] || continue
    for _ in $(seq 1 60); do
      c=$(ofctl dump-flows "$b" | grep -cFf <(sed 's/$/,/' <<<"$refc") || true)
      [ "$c" = 0 ] && break; sleep 0.5
    done
    log "hv$n $b: $c flows with the reference's $(wc -l <<<"$refc") cookie(s) left"
    left=$((left + c))
  done
  [ "$left" = 0 ] && pass "hv$n: taken over, no flow with the reference's cookie left" || fail "hv$n: $left flows with the reference's cookies left"
}

step_check() {
  # the first SNAT pings right after a host's agent changed can go unanswered (the reference's as
  # well, right after the scenario): once more after 5 s before it counts
  if "$HERE/dvr.sh" check > "$D/check.txt" 2>&1; then cat "$D/check.txt"; pass "dvr.sh check"; return; fi
  cat "$D/check.txt"; log "dvr.sh check failed: again in 5 s"; sleep 5
  if "$HERE/dvr.sh" check > "$D/check.txt" 2>&1; then cat "$D/check.txt"; pass "dvr.sh check (second try)"; else cat "$D/check.txt"; fail "dvr.sh check"; fi
}

step_eastwest() {
  st; hv 2
  local mac2 r qr bad own nn
  mac2=$(dvrmac "$HOSTN")
  qr=$(qr_macs | tr '\n' ' ')
  tcp_start eastwest
  sniff 2 und2 6 "$D/ew-und2.txt"; sniff 1 und1 6 "$D/ew-und1.txt"
  sleep 1
  r=$(pingn vm1 "$vm2_IP" 20 0.2); wsniff
  log "vm1 ($vm1_IP, hv2) -> vm2 ($vm2_IP, hv3): sent/received $r; hv2's DVR MAC $mac2, qr MACs $qr"
  [ "$(cut -d' ' -f2 <<<"$r")" = 20 ] && pass "east-west ping 20/20" || fail "east-west ping $r"
  # frames hv2 sent for vm1 -> vm2: inner source = hv2's DVR MAC, never a qr- MAC
  own=$(awk -v a="$vm1_IP" -v b="$vm2_IP" -v m="$mac2" '$1=="172.31.254.2" && $6==a && $7==b && $4==m' "$D/ew-und2.txt" | grep -c . || true)
  bad=$(grep -ciE "$(tr ' ' '\n' <<<"$qr" | grep . | paste -sd'|')" "$D/ew-und2.txt" || true)
  log "hv2's underlay (und2): $(grep -vc '^#' "$D/ew-und2.txt" || true) VXLAN frames, $own hv2 -> hv3 vm1 -> vm2 with inner source $mac2, $bad with a qr- MAC"
  head -4 "$D/ew-und2.txt" | sed 's/^/    /'
  [ "$own" -ge 10 ] && [ "$bad" = 0 ] && pass "underlay: hv2's frames carry hv2's DVR MAC, no qr- MAC" || fail "underlay: $own frames with hv2's DVR MAC, $bad with a qr- MAC"
  nn=$(awk -v a="$vm1_IP" -v b="$vm2_IP" '($6==a && $7==b) || ($6==b && $7==a)' "$D/ew-und1.txt" | grep -c . || true)
  log "network node's underlay (und1): $(grep -vc '^#' "$D/ew-und1.txt" || true) VXLAN frames, $nn of vm1 <-> vm2"
  [ "$nn" = 0 ] && pass "the network node's underlay saw none of vm1 <-> vm2" || fail "the network node saw $nn frames of vm1 <-> vm2"
  tcp_check
}

step_samehost() {
  st
  local r n
  sniff 3 und3 5 "$D/sh-und3.txt"; sleep 1
  r=$(pingn vm3 "$vm2_IP" 15 0.2); wsniff
  n=$(awk -v a="$vm3_IP" -v b="$vm2_IP" '($6==a && $7==b) || ($6==b && $7==a)' "$D/sh-und3.txt" | grep -c . || true)
  log "vm3 ($vm3_IP, A, hv3) -> vm2 ($vm2_IP, B, hv3): sent/received $r; hv3's underlay: $n frames of it"
  [ "$(cut -d' ' -f2 <<<"$r")" = 15 ] && pass "same-host routed ping 15/15" || fail "same-host ping $r"
  [ "$n" = 0 ] && pass "routed on hv3 without leaving it (no frame on und3)" || fail "$n frames of vm3 <-> vm2 on hv3's underlay"
}

step_northsouth() {
  st
  local r snat fgmac n1 n3 m
  snat=$(api "/routers/$ROUTER" | jq -r '.router.external_gateway_info.external_fixed_ips[0].ip_address')
  # SNAT: vm1 (hv2, no floating IP) -> outside; the outside sees the router's gateway address,
  # arriving from hv1's br-phys (eth1 in the outside netns)
  sniff ext eth1 5 "$D/ns-eth1.txt" plain; sniff ext eth2 5 "$D/ns-eth2.txt" plain; sleep 1
  r=$(pingn vm1 "$EXT_GW" 10 0.2); wsniff
  n1=$(awk -v s="$snat" -v g="$EXT_GW" '$1=="in" && $3==s && $4==g' "$D/ns-eth1.txt" | grep -c . || true)
  m=$(awk -v a="$vm1_IP" '$3==a' "$D/ns-eth1.txt" "$D/ns-eth2.txt" | grep -c . || true)
  log "SNAT vm1 -> $EXT_GW: sent/received $r; at the outside from hv1 (eth1) $n1 packets from $snat (router gateway), $m with vm1's own address"
  [ "$(cut -d' ' -f2 <<<"$r")" = 10 ] && [ "$n1" -ge 10 ] && [ "$m" = 0 ] && pass "SNAT on the network node" || fail "SNAT: ping $r, $n1 from $snat on eth1, $m unNATed"
  # floating IP: outside -> vm2's floating IP answered from hv3's br-phys (eth3) by the fg- port
  # the fg- device of hv3's fip namespace (the API lists no project-less port to project demo)
  fgmac=$(VARIANT=dvr HV=3 "$HERE/release.sh" l3exec sh -c 'for n in $(ip netns | cut -d" " -f1 | grep "^fip-"); do ip netns exec "$n" ip -br link; done' 2>/dev/null \
    | awk '$1 ~ /^fg-/ {print $3; exit}' || true)
  sniff ext eth3 5 "$D/ns-eth3.txt" plain; sniff ext eth1 5 "$D/ns-eth1b.txt" plain; sleep 1
  r=$({ ip netns exec "$EXTNS" ping -n -q -c 10 -i 0.2 -W 1 "$FIP" || true; } | sed -nE 's/^([0-9]+) packets transmitted, ([0-9]+) received.*/\1 \2/p'); wsniff
  n3=$(awk -v f="$FIP" -v m="$fgmac" '$1=="in" && $3==f && $2==m' "$D/ns-eth3.txt" | grep -c . || true)
  n1=$(awk -v f="$FIP" '$1=="in" && $3==f' "$D/ns-eth1b.txt" | grep -c . || true)
  log "outside -> floating IP $FIP (vm2, hv3): sent/received $r; replies from hv3 (eth3) with hv3's fg- MAC $fgmac: $n3; from hv1 (eth1): $n1"
  [ "$(cut -d' ' -f2 <<<"$r")" = 10 ] && [ "$n3" -ge 10 ] && [ "$n1" = 0 ] && pass "floating IP through hv3's fg- port" || fail "floating IP: ping $r, $n3 via hv3's fg-, $n1 via hv1"
}

step_restart() {
  local n=$1 bin=$2 t r d
  st; hv "$n"
  for b in br-int br-tun br-phys; do ofctl --no-stats dump-flows "$b" | sed -E 's/^ *//' | grep -v '^OFPST' | sort > "$D/before-restart-$b.txt"; done
  bg ping-restart ip netns exec "${VMPFX}vm1" ping -n -i 0.05 -W 1 "$vm2_IP"
  sleep 2
  kill_ours "ovs-agent-hv$n" KILL
  log "hv$n: ovs-agent killed (SIGKILL)"
  sleep 1
  t=$(date +%s%N); start_ours "$n" "$bin"
  log "hv$n: ovs-agent started again, in sync $(wait_insync "$n" "$t") ms after start"
  sleep 3
  kill_ours ping-restart INT
  r=$(ping_lost "$D/ping-restart.out")
  log "vm1 -> vm2 every 0.05 s across the kill and the start: last answered seq, answers, lost: $r ($(grep -E 'packets transmitted' "$D/ping-restart.out" || true))"
  [ "$(cut -d' ' -f2 <<<"$r")" -gt 50 ] && [ "$(cut -d' ' -f3 <<<"$r")" = 0 ] && pass "0 lost across kill -9 and restart of hv$n's ovs-agent" || fail "lost: $r"
  d=0
  for b in br-int br-tun br-phys; do
    ofctl --no-stats dump-flows "$b" | sed -E 's/^ *//' | grep -v '^OFPST' | sort > "$D/after-restart-$b.txt"
    # the learnt table-20 flows (hard_timeout) age; everything else must be the same, cookies included
    c=$(diff <(grep -v hard_timeout= "$D/before-restart-$b.txt") <(grep -v hard_timeout= "$D/after-restart-$b.txt") | grep -c '^[<>]' || true)
    log "hv$n $b: $(grep -vc hard_timeout= "$D/after-restart-$b.txt") flows, $c lines differ from before the kill"
    d=$((d + c))
  done
  [ "$d" = 0 ] && pass "hv$n: flows after the restart equal to before (cookies included)" || fail "hv$n: $d flow lines differ after the restart"
  tcp_check
}

a_flows() { # N GWMAC GWIP LV: hvN's DVR flows of subnet A (by gateway MAC, gateway IP, A's local VLAN in the DVR tables)
  hv "$1"
  { ofctl --no-stats dump-flows br-tun; ofctl --no-stats dump-flows br-phys; } | sed -E 's/^ *//; s/^/br-tun|br-phys: /' | grep -iE "$2|arp_tpa=$3[,[:space:]]" || true
  ofctl --no-stats dump-flows br-int | sed -E 's/^ *//; s/^/br-int: /' \
    | grep -iE "$2|arp_tpa=$3[,[:space:]]|table=[1-4], .*dl_vlan=$4,|table=60, priority=20,dl_vlan=$4," || true
}
step_iface() {
  st
  local qr gw gwip t r n lv stop start h hosts="${DVR_OURS:-1 2 3}" c
  qr=$(api "/ports?device_owner=network:router_interface_distributed&network_id=$NETA" | jq -c '.ports[0]')
  gw=$(jq -r .mac_address <<<"$qr"); gwip=$(jq -r '.fixed_ips[0].ip_address' <<<"$qr")
  declare -A LV
  for h in $hosts; do hv "$h"; LV[$h]=$(vsctl get Port "tap$(jq -r .id <<<"$qr" | cut -c1-11)" tag 2>/dev/null || echo none); done
  for h in $hosts; do
    a_flows "$h" "$gw" "$gwip" "${LV[$h]}" > "$D/iface-before-hv$h.txt"
    c=$(grep -c . "$D/iface-before-hv$h.txt" || true)
    log "hv$h: subnet A (gateway $gwip $gw, local VLAN ${LV[$h]}): $c DVR flows before the removal"
    # the stale-flow check below must be able to fail: it finds A's flows while A is routed
    [ "$c" -gt 0 ] || fail "hv$h: the check finds no DVR flow of subnet A before the removal"
  done
  bg ping-iface ip netns exec "${VMPFX}vm1" ping -n -D -O -i 0.1 -W 1 "$vm2_IP"
  sleep 2
  t=$(date +%s.%N)
  apiw PUT "/routers/$ROUTER/remove_router_interface" "{\"subnet_id\":\"$SUBA\"}" >/dev/null
  log "interface A removed"
  sleep 8
  for h in $hosts; do
    c=0
    for _ in $(seq 1 40); do a_flows "$h" "$gw" "$gwip" "${LV[$h]}" > "$D/iface-after-hv$h.txt"; c=$(grep -c . "$D/iface-after-hv$h.txt" || true); [ "$c" = 0 ] && break; sleep 0.5; done
    [ "$c" = 0 ] && pass "hv$h: no DVR flow of subnet A left after the removal" || { fail "hv$h: $c DVR flows of subnet A left"; sed 's/^/    /' "$D/iface-after-hv$h.txt"; }
  done
  # ping -D: [receive time]; the last reply after the removal call, and none in the 3 s before the re-add
  stop=$(awk -v t="$t" -F'[][]' '/bytes from/ && $2 >= t {l=$2} END {print l}' "$D/ping-iface.out")
  r=$(date +%s.%N)
  n=$(awk -v r="$r" -F'[][]' '/bytes from/ && $2 > r - 3' "$D/ping-iface.out" | grep -c . || true)
  log "vm1 -> vm2 (every 0.1 s): last reply $([ -n "$stop" ] && printf %.2f "$(echo "$stop - $t" | bc -l)" || echo "-") s after the removal call; $n replies in the 3 s before the re-add"
  [ "$n" = 0 ] && [ "$(awk -v t="$t" -F'[][]' '/bytes from/ && $2 < t' "$D/ping-iface.out" | grep -c . || true)" -gt 5 ] && pass "traffic stopped after the removal" || fail "traffic did not stop ($n replies in the 3 s before the re-add) or did not flow before"
  t=$(date +%s.%N)
  apiw PUT "/routers/$ROUTER/add_router_interface" "{\"subnet_id\":\"$SUBA\"}" >/dev/null
  log "interface A added back"
  for _ in $(seq 1 300); do awk -v t="$t" -F'[][]' '/bytes from/ && $2 > t {f=1} END {exit !f}' "$D/ping-iface.out" && break; sleep 0.2; done
  start=$(awk -v t="$t" -F'[][]' '/bytes from/ && $2 > t {print $2; exit}' "$D/ping-iface.out")
  kill_ours ping-iface INT
  if [ -n "$start" ]; then
    pass "traffic flows again $(printf %.2f "$(echo "$start - $t" | bc -l)") s after the interface was added back"
  else
    fail "no reply after the interface was added back"
  fi
  # the re-added interface is a new port with a new MAC: every host's DVR flows name it, none the old one
  local ngw o nw
  ngw=$(api "/ports?device_owner=network:router_interface_distributed&network_id=$NETA" | jq -r '.ports[0].mac_address')
  for h in $hosts; do
    for _ in $(seq 1 40); do
      hv "$h"
      nw=$({ ofctl --no-stats dump-flows br-int; ofctl --no-stats dump-flows br-tun; } | grep -ci "$ngw" || true)
      o=$({ ofctl --no-stats dump-flows br-int; ofctl --no-stats dump-flows br-tun; } | grep -ci "$gw" || true)
      [ "$nw" -gt 0 ] && [ "$o" = 0 ] && break; sleep 0.5
    done
    log "hv$h: after the re-add $nw flows name A's new gateway MAC $ngw, $o the old $gw"
    [ "$nw" -gt 0 ] && [ "$o" = 0 ] && pass "hv$h: the re-added interface's flows carry its new gateway MAC" || fail "hv$h: $nw flows with the new gateway MAC, $o with the removed one"
  done
  tcp_check
}

step_report() { # report_state: every host's agent row in distributed mode (polled: a report every report_interval)
  local n row
  for n in 1 2 3; do
    hv "$n"; row=""
    for _ in $(seq 1 45); do
      row=$(api "/agents?host=$HOSTN&binary=neutron-openvswitch-agent" \
        | jq -c '.agents[] | {alive, in_distributed_mode: .configurations.in_distributed_mode, enable_distributed_routing: .configurations.enable_distributed_routing, arp_responder_enabled: .configurations.arp_responder_enabled}' || true)
      grep -q '"alive":true,"in_distributed_mode":true,"enable_distributed_routing":true,"arp_responder_enabled":true' <<<"$row" && break
      sleep 1
    done
    log "hv$n ($HOSTN): agent row $row"
    grep -q '"alive":true,"in_distributed_mode":true,"enable_distributed_routing":true,"arp_responder_enabled":true' <<<"$row" \
      && pass "hv$n: report_state alive, in distributed mode" || fail "hv$n: report_state $row"
  done
}

step_teardown() {
  local n
  kill_ours tcp-client TERM; kill_ours tcp-server TERM; kill_ours ping-restart INT; kill_ours ping-iface INT
  for n in $TAKEOVER_PINGS; do kill_ours "ping-takeover-$n" INT; done
  for n in 1 2 3; do kill_ours "ovs-agent-hv$n" TERM; done
  "$HERE/dvr.sh" down
}

hv 1   # hv1's names until a step picks a host
cmd=${1:-}; shift || true
case "$cmd" in
  up) step_up ;;
  ifbench) "$HERE/dvr.sh" ifbench "${1:-3}" ;;
  replace) step_replace "$@" ;;
  check) step_check ;;
  eastwest) step_eastwest ;;
  samehost) step_samehost ;;
  northsouth) step_northsouth ;;
  restart) step_restart "$1" "$2" ;;
  iface) step_iface ;;
  report) step_report ;;
  tcp) tcp_check ;;
  ipv6) TENANT=vxlan "$HERE/dvr_tenant.sh" v6 "$D/ipv6" || FAILS=$((FAILS + 1)) ;;
  tenant) case "${1:-}" in vlan|gre|geneve) TENANT=$1 "$HERE/dvr_tenant.sh" addon "$D/tenant-$1" || FAILS=$((FAILS + 1)) ;;
            *) echo "dvr_e2e.sh tenant: vlan, gre or geneve, not '${1:-}'" >&2; exit 2 ;; esac ;;
  teardown) step_teardown ;;
  *) echo "usage: RELEASE=2026.2 $0 up|ifbench N|replace BIN N...|check|eastwest|samehost|northsouth|restart N BIN|iface|report|tcp|tenant vlan|gre|geneve|ipv6|teardown" >&2; exit 2 ;;
esac
finish
