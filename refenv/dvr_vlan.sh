#!/bin/bash
# refenv dvr_vlan.sh — DVR with VLAN tenant networks (issue 16) on refenv/dvr.sh's NHV=3 environment
# brought up with TENANT=vlan (subnets A and B on VLAN networks VLAN_A/VLAN_B of physnet1; the
# hypervisors' br-phys meet on the outside namespace's Linux bridge br0, which has no
# vlan_filtering and so forwards the tagged frames between them).
#
#   TENANT=vlan refenv/dvr_e2e.sh up     the environment and the scenario (reference agents)
#   refenv/dvr_vlan.sh segment [OUT]     vm1 (A, hv2) -> vm2 (B, hv3) 20 pings and vm3 (A, hv3) ->
#                                        vm2 15 pings, the frames on the VLAN segment (the outside's
#                                        veth of each hypervisor's br-phys, eth1..3) recorded: hv2
#                                        sends vm1 -> vm2 on B's VLAN with hv2's DVR MAC as source,
#                                        hv3 the replies on A's VLAN with hv3's; no frame with a qr-
#                                        MAC as source; hv1 (network node) sends none of it; the
#                                        same-host pair puts no frame on the segment
#   refenv/dvr_e2e.sh replace BIN 2 3 1  ovs-agent in place of the reference (flows compared)
#   refenv/dvr_vlan.sh run BIN OUT       all of it: up, capture (OUT/reference), segment, replace,
#                                        dvr.sh check, segment and capture again, teardown
#
# PASS:/FAIL: lines, exit 1 on a failure. Run under the e2e lock (flock -o /tmp/ovsagent-e2e.lock).
set -euo pipefail
export PATH=/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin
HERE=$(cd "$(dirname "$0")" && pwd)
export RELEASE=${RELEASE:-2026.2}
STATE=/run/refenv/$RELEASE-dvr/dvr.env
VMPFX=$RELEASE-dvr-; EXTNS=${VMPFX}ext
VLAN_A=${VLAN_A:-1101}; VLAN_B=${VLAN_B:-1102}
log() { echo "[dvr-vlan $(date +%T.%3N)] $*"; }
FAILS=0
pass() { log "PASS: $*"; }
fail() { log "FAIL: $*"; FAILS=$((FAILS + 1)); }
eval "$(VARIANT=dvr "$HERE/release.sh" env)"
api() { curl -sS -f -H 'X-Project-Id: demo' "http://127.0.0.1:$REFENV_API_PORT/v2.0$1"; }
host_of() { VARIANT=dvr HV=$1 "$HERE/release.sh" env | sed -n 's/^REFENV_AGENT_HOST=//p'; }
dvrmac() { mysql -N -e "SELECT LOWER(REPLACE(mac_address,'-',':')) FROM $REFENV_DB.dvr_host_macs WHERE host='$1'"; }
pingn() { # vm dst count interval: "sent received"
  { ip netns exec "$VMPFX$1" ping -n -q -c "$3" -i "$4" -W 1 "$2" 2>/dev/null || true; } | sed -nE 's/^([0-9]+) packets transmitted, ([0-9]+) (packets )?received.*/\1 \2/p'
}
sniff() { ip netns exec "$EXTNS" python3 "$HERE/dvr_vlan_sniff.py" "$1" "$2" > "$3" 2>&1 & SNIFFS="${SNIFFS:-} $!"; }
wsniff() { local p; for p in ${SNIFFS:-}; do wait "$p" || true; done; SNIFFS=""; }
count() { awk "$1" "$2" | grep -c . || true; }

segment() {
  local out=${1:-/tmp/refenv-dvr-vlan-$RELEASE} m1 m2 m3 qr r n a b q nn sh
  mkdir -p "$out"
  . "$STATE"
  m1=$(dvrmac "$(host_of 1)"); m2=$(dvrmac "$(host_of 2)"); m3=$(dvrmac "$(host_of 3)")
  qr=$(api "/ports?device_owner=network:router_interface_distributed" | jq -r '.ports[].mac_address' | paste -sd'|')
  log "DVR MACs hv1 $m1, hv2 $m2, hv3 $m3; qr- MACs $qr; vm1 $vm1_IP (hv$vm1_HV) vm2 $vm2_IP (hv$vm2_HV) vm3 $vm3_IP (hv$vm3_HV)"
  api /networks | jq -r '.networks[] | "  network \(.name) \(."provider:network_type") \(."provider:segmentation_id" // "-")"'
  for n in 1 2 3; do sniff "eth$n" 7 "$out/ew-eth$n.txt"; done
  sleep 1
  r=$(pingn vm1 "$vm2_IP" 20 0.2); wsniff
  log "east-west vm1 -> vm2 across hosts: sent/received $r"
  [ "$(cut -d' ' -f2 <<<"$r")" = 20 ] && pass "east-west across hosts on VLAN networks 20/20" || fail "east-west across hosts $r"
  for n in 1 2 3; do log "eth$n (hv$n's br-phys): $(grep -vc '^#' "$out/ew-eth$n.txt" || true) frames"; head -3 "$out/ew-eth$n.txt" | sed 's/^/    /'; done
  # "in" on ethN = sent by hvN
  a=$(count "\$1==\"in\" && \$2==\"vlan=$VLAN_B\" && \$3==\"$m2\" && \$5==\"$vm1_IP\" && \$6==\"$vm2_IP\"" "$out/ew-eth2.txt")
  b=$(count "\$1==\"in\" && \$2==\"vlan=$VLAN_A\" && \$3==\"$m3\" && \$5==\"$vm2_IP\" && \$6==\"$vm1_IP\"" "$out/ew-eth3.txt")
  q=$(cat "$out"/ew-eth*.txt | awk '{print $3}' | grep -ciE "^($qr)$" || true)
  nn=$(count "\$1==\"in\" && ((\$5==\"$vm1_IP\" && \$6==\"$vm2_IP\") || (\$5==\"$vm2_IP\" && \$6==\"$vm1_IP\"))" "$out/ew-eth1.txt")
  log "segment: hv2 sent $a vm1 -> vm2 frames on VLAN $VLAN_B with source $m2 (hv2's DVR MAC); hv3 sent $b replies on VLAN $VLAN_A with source $m3 (hv3's); $q frames with a qr- MAC as source; hv1 sent $nn of vm1 <-> vm2"
  [ "$a" -ge 18 ] && [ "$b" -ge 18 ] && pass "VLAN segment: each host sends routed frames with its own DVR MAC on the destination's VLAN" || fail "VLAN segment: $a / $b frames with the DVR MACs"
  [ "$q" = 0 ] && pass "VLAN segment: no frame with a qr- MAC as source" || fail "VLAN segment: $q frames with a qr- MAC as source"
  [ "$nn" = 0 ] && pass "the network node sent none of vm1 <-> vm2" || fail "the network node sent $nn frames of vm1 <-> vm2"
  for n in 1 2 3; do sniff "eth$n" 5 "$out/sh-eth$n.txt"; done
  sleep 1
  r=$(pingn vm3 "$vm2_IP" 15 0.2); wsniff
  sh=$(cat "$out"/sh-eth*.txt | count "(\$5==\"$vm3_IP\" && \$6==\"$vm2_IP\") || (\$5==\"$vm2_IP\" && \$6==\"$vm3_IP\")" -)
  log "same host vm3 -> vm2 (hv3): sent/received $r; $sh frames of it on the segment"
  [ "$(cut -d' ' -f2 <<<"$r")" = 15 ] && [ "$sh" = 0 ] && pass "same host on VLAN networks 15/15, 0 frames on the segment" || fail "same host: $r, $sh frames on the segment"
}

run() { # BIN OUT: the whole sequence, the environment torn down at the end (also on a failure)
  local bin=$1 out=$2 r=0
  mkdir -p "$out"
  export TENANT=vlan NHV=3 DVR_E2E_DIR=$out/e2e
  RUN_OUT=$out  # the trap runs after run() returned: no local in it
  trap '"$HERE/dvr_e2e.sh" teardown > "$RUN_OUT/teardown.txt" 2>&1 || true; log "torn down ($RUN_OUT/teardown.txt)"' EXIT
  "$HERE/dvr_e2e.sh" up || r=1
  "$HERE/dvr.sh" capture "$out/reference" || r=1
  segment "$out/segment-reference" || true
  "$HERE/dvr_e2e.sh" replace "$bin" 2 3 1 || r=1
  "$HERE/dvr_e2e.sh" check || r=1
  segment "$out/segment-ovs-agent" || true
  NHV=3 "$HERE/dvr.sh" capture "$out/ovs-agent" || r=1
  [ "$r" = 0 ] || FAILS=$((FAILS + 1))
}

cmd=${1:-}; shift || true
case "$cmd" in
  segment) segment "${1:-}" ;;
  run) run "$1" "$2" ;;
  *) echo "usage: RELEASE=2026.2 $0 segment [OUT] | run BIN OUT" >&2; exit 2 ;;
esac
[ "$FAILS" = 0 ] || { log "$FAILS failure(s)"; exit 1; }
