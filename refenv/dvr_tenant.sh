#!/bin/bash
# refenv dvr_tenant.sh — DVR with VLAN, GRE or Geneve tenant networks (issue 16; TENANT=vlan, the
# default, gre or geneve) on refenv/dvr.sh's NHV=3 environment (hv1 network node, hv2 and hv3
# computes). VLAN: the networks on physnet1 (VLAN_A/VLAN_B); the hypervisors' br-phys meet on the
# outside namespace's Linux bridge br0, which has no vlan_filtering and so forwards the tagged
# frames between them: the "segment" is the outside's veth of each hypervisor's br-phys (eth1..3).
# GRE/Geneve: the networks of that type (the server picks the key/VNI); the segment is the
# underlay's Linux bridge port of each hypervisor (p1..3 in netns <release>-dvr-und), where the
# sniffer reads the tunnel header's key/VNI and the inner frame. Every agent is started with
# tunnel_types vxlan,gre,geneve (dvr.sh).
#
#   TENANT=vlan refenv/dvr_e2e.sh up     the environment and the scenario (reference agents; A and B
#                                        of type TENANT)
#   refenv/dvr_tenant.sh segment [OUT]   vm1 (A, hv2) -> vm2 (B, hv3) 20 pings and vm3 (A, hv3) ->
#                                        vm2 15 pings, the frames on the segment recorded: hv2
#                                        sends vm1 -> vm2 on B's segment (VLAN / key / VNI) with hv2's
#                                        DVR MAC as (inner) source, hv3 the replies on A's with hv3's;
#                                        no frame with a qr- MAC as source; hv1 (network node) sends
#                                        none of it; the same-host pair puts no frame on the segment
#   refenv/dvr_e2e.sh replace BIN 2 3 1  ovs-agent in place of the reference (flows compared)
#   refenv/dvr_tenant.sh addon [OUT]     in a running environment (TestDVR's: vxlan A and B):
#                                        networks C and D of type TENANT (VLAN: VLAN_C 1103, VLAN_D
#                                        1104) added to the router, vm4 (C, hv2), vm5 (D, hv3), vm6
#                                        (C, hv3): segment's checks for them; the interfaces
#                                        removed: no flow of C's router port left; everything of it
#                                        deleted again
#   TENANT=vxlan refenv/dvr_tenant.sh v6 [OUT]   in a running environment (TestDVR's): IPv6
#                                        subnets A6 fd00:120:1::/64 and B6 fd00:120:2::/64 on A and
#                                        B (static addresses, no RA mode) added to the router, vm1-3
#                                        given an address each (port update; configured in the VM
#                                        namespace, default route via the gateway): vm1 -> vm2
#                                        answers; segment's checks with the IPv6 addresses; the
#                                        interfaces removed: no IPv6 RA drop (br-tun) nor flow of a
#                                        removed router port left; the IPv6 subnets deleted again
#   refenv/dvr_tenant.sh run BIN OUT     all of it: up, capture (OUT/reference), segment, replace,
#                                        dvr.sh check, segment, addon and capture again, teardown;
#                                        IPV6=1 (with TENANT=vxlan): v6's subnets added after up, so
#                                        that both captures and the takeover's comparison hold them,
#                                        segment with IPv6 too, no addon, v6's removal checks last
#
# PASS:/FAIL: lines, exit 1 on a failure. Run under the e2e lock (flock -o /tmp/ovsagent-e2e.lock).
set -euo pipefail
export PATH=/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin
HERE=$(cd "$(dirname "$0")" && pwd)
export RELEASE=${RELEASE:-2026.2}
TENANT=${TENANT:-vlan}
case "$TENANT" in vlan|gre|geneve|vxlan) ;; *) echo "dvr_tenant.sh: TENANT=$TENANT is not vlan, gre, geneve or vxlan" >&2; exit 2 ;; esac
# the VMs' addresses segment() pings: IP (IPv4), IP6 (IPv6: the v6 step)
IPK=${IPK:-IP}
VLAN_A=${VLAN_A:-1101}; VLAN_B=${VLAN_B:-1102}
log() { echo "[dvr-$TENANT $(date +%T.%3N)] $*"; }
eval "$(VARIANT=dvr "$HERE/release.sh" env)"
# STATE, VMPFX, EXTNS; hv, vsctl, ofctl, host_of, dvrmac, apiw, apid, pingn, sniff, wsniff, pass, fail
# shellcheck source=lib/dvr.sh
. "$HERE/lib/dvr.sh"
api() { curl -sS -f -H 'X-Project-Id: demo' "http://127.0.0.1:$REFENV_API_PORT/v2.0$1"; }
# segsniff N SECS OUT: the frames hvN puts on the segment ("in") and gets from it ("out"), in
# dvr_sniff.py's vlan / tunnel layout: <in|out> <vlan|gre|geneve>=<id> <src mac> <dst mac> <src ip> <dst ip>
segsniff() {
  if [ "$TENANT" = vlan ]; then sniff ext "eth$1" "$2" "$3" vlan
  else sniff und "p$1" "$2" "$3" tunnel
  fi
}
# seglabel NET-ID: the network's segment as the sniffer prints it (vlan=1101, gre=7, geneve=12)
seglabel() {
  local t id
  read -r t id < <(api "/networks/$1" | jq -r '.network | "\(."provider:network_type") \(."provider:segmentation_id")"')
  [ "$t" = "$TENANT" ] || { log "network $1 is $t, not $TENANT" >&2; echo "none"; return 0; }
  [ "$t" = vxlan ] && t=vni  # dvr_sniff.py's name of VXLAN's id
  echo "$t=$id"
}
count() { awk "$1" "$2" | grep -c . || true; }

segment() { # OUT [X Y Z NX NY]: X (hv2, network NX) -> Y (hv3, NY) and Z (hv3, NX) -> Y; default vm1 vm2 vm3 A B
  local out=${1:-/tmp/refenv-dvr-$TENANT-$RELEASE} m1 m2 m3 qr r n a b q nn sh
  local vm1_IP vm2_IP vm3_IP vm1_HV vm2_HV vm3_HV
  mkdir -p "$out"
  . "$STATE"; [ -f "$ASTATE" ] && . "$ASTATE"; [ -f "$V6STATE" ] && . "$V6STATE"
  local X=${2:-vm1} Y=${3:-vm2} Z=${4:-vm3} NX=${5:-$NETA} NY=${6:-$NETB} LX LY
  LX=$(seglabel "$NX"); LY=$(seglabel "$NY")
  eval "vm1_IP=\${${X}_$IPK} vm1_HV=\${${X}_HV} vm2_IP=\${${Y}_$IPK} vm2_HV=\${${Y}_HV} vm3_IP=\${${Z}_$IPK} vm3_HV=\${${Z}_HV}"
  m1=$(dvrmac "$(host_of 1)"); m2=$(dvrmac "$(host_of 2)"); m3=$(dvrmac "$(host_of 3)")
  qr=$(api "/ports?device_owner=network:router_interface_distributed" | jq -r '.ports[].mac_address' | paste -sd'|')
  log "DVR MACs hv1 $m1, hv2 $m2, hv3 $m3; qr- MACs $qr; $X $vm1_IP (hv$vm1_HV) $Y $vm2_IP (hv$vm2_HV) $Z $vm3_IP (hv$vm3_HV)"
  api /networks | jq -r '.networks[] | "  network \(.name) \(."provider:network_type") \(."provider:segmentation_id" // "-")"'
  for n in 1 2 3; do segsniff "$n" 7 "$out/ew-hv$n.txt"; done
  sleep 1
  r=$(pingn "$X" "$vm2_IP" 20 0.2); wsniff
  log "east-west $X -> $Y across hosts: sent/received $r"
  [ "$(cut -d' ' -f2 <<<"$r")" = 20 ] && pass "east-west across hosts on $TENANT networks 20/20" || fail "east-west across hosts $r"
  for n in 1 2 3; do log "hv$n's segment port: $(grep -vc '^#' "$out/ew-hv$n.txt" || true) frames"; head -3 "$out/ew-hv$n.txt" | sed 's/^/    /'; done
  # "in" = sent by hvN
  a=$(count "\$1==\"in\" && \$2==\"$LY\" && \$3==\"$m2\" && \$5==\"$vm1_IP\" && \$6==\"$vm2_IP\"" "$out/ew-hv2.txt")
  b=$(count "\$1==\"in\" && \$2==\"$LX\" && \$3==\"$m3\" && \$5==\"$vm2_IP\" && \$6==\"$vm1_IP\"" "$out/ew-hv3.txt")
  q=$(cat "$out"/ew-hv*.txt | awk '{print $3}' | grep -ciE "^($qr)$" || true)
  nn=$(count "\$1==\"in\" && ((\$5==\"$vm1_IP\" && \$6==\"$vm2_IP\") || (\$5==\"$vm2_IP\" && \$6==\"$vm1_IP\"))" "$out/ew-hv1.txt")
  log "segment: hv2 sent $a $X -> $Y frames on $LY with source $m2 (hv2's DVR MAC); hv3 sent $b replies on $LX with source $m3 (hv3's); $q frames with a qr- MAC as source; hv1 sent $nn of $X <-> $Y"
  [ "$a" -ge 18 ] && [ "$b" -ge 18 ] && pass "$TENANT segment: each host sends routed frames with its own DVR MAC on the destination network's segment ($LY / $LX)" || fail "$TENANT segment: $a / $b frames with the DVR MACs"
  [ "$q" = 0 ] && pass "$TENANT segment: no frame with a qr- MAC as source" || fail "$TENANT segment: $q frames with a qr- MAC as source"
  [ "$nn" = 0 ] && pass "the network node sent none of $X <-> $Y" || fail "the network node sent $nn frames of $X <-> $Y"
  for n in 1 2 3; do segsniff "$n" 5 "$out/sh-hv$n.txt"; done
  sleep 1
  r=$(pingn "$Z" "$vm2_IP" 15 0.2); wsniff
  sh=$(cat "$out"/sh-hv*.txt | count "(\$5==\"$vm3_IP\" && \$6==\"$vm2_IP\") || (\$5==\"$vm2_IP\" && \$6==\"$vm3_IP\")" -)
  log "same host $Z -> $Y (hv3): sent/received $r; $sh frames of it on the segment"
  [ "$(cut -d' ' -f2 <<<"$r")" = 15 ] && [ "$sh" = 0 ] && pass "same host on $TENANT networks 15/15, 0 frames on the segment" || fail "same host: $r, $sh frames on the segment"
}

# ---- addon: networks C, D of type TENANT added to a running environment's router (TestDVR's, vxlan A/B) ----
ASTATE=/run/refenv/$RELEASE-dvr/dvr_tenant.env
VLAN_C=${VLAN_C:-1103}; VLAN_D=${VLAN_D:-1104}
aplug() { # key net hv: a port on net bound to hv, plugged as dvr.sh plug does; recorded in $ASTATE
  local key=$1 pj pid mac ip tap ns=$VMPFX$1 gw t0
  pj=$(apiw POST /ports "{\"port\":{\"name\":\"$key-port\",\"project_id\":\"demo\",\"network_id\":\"$2\",\"binding:host_id\":\"$(host_of "$3")\",\"device_owner\":\"compute:nova\",\"device_id\":\"$(uuidgen)\"}}")
  pid=$(jq -r .port.id <<<"$pj"); mac=$(jq -r .port.mac_address <<<"$pj"); ip=$(jq -r '.port.fixed_ips[0].ip_address' <<<"$pj")
  gw=${ip%.*}.1; tap="tap${pid:0:11}"; hv "$3"
  { echo "${key}_PORT=$pid"; echo "${key}_TAP=$tap"; echo "${key}_IP=$ip"; echo "${key}_MAC=$mac"; echo "${key}_HV=$3"; } >> "$ASTATE"
  ip netns add "$ns"
  ip netns exec "$HVNS" ip link add "$tap" type veth peer name "v${pid:0:11}"
  ip netns exec "$HVNS" ip link set "v${pid:0:11}" netns "$ns"
  ip netns exec "$ns" ip link set "v${pid:0:11}" name eth0
  ip netns exec "$ns" ip link set eth0 address "$mac"
  ip netns exec "$ns" ip addr add "$ip/24" dev eth0
  ip netns exec "$ns" ip link set lo up; ip netns exec "$ns" ip link set eth0 up
  ip netns exec "$ns" ip route replace default via "$gw"
  ip netns exec "$ns" ethtool -K eth0 tx off >/dev/null 2>&1 || true
  ip netns exec "$HVNS" ethtool -K "$tap" tx off >/dev/null 2>&1 || true
  ip netns exec "$HVNS" ip link set "$tap" up
  vsctl -- --may-exist add-port br-int "$tap" -- set Interface "$tap" external_ids:iface-id="$pid" \
    external_ids:attached-mac="$mac" external_ids:iface-status=active external_ids:vm-uuid="$(jq -r .port.device_id <<<"$pj")"
  t0=$(date +%s%N)
  for _ in $(seq 1 600); do [ "$(api "/ports/$pid" | jq -r .port.status)" = ACTIVE ] && break; sleep 0.1; done
  log "$ns: port $pid ($ip, $mac) on hv$3: $(api "/ports/$pid" | jq -r .port.status) after $(( ($(date +%s%N) - t0) / 1000000 )) ms"
}
aclean() { # the addon's VMs (netns, taps) and API objects
  local k tap h id
  if [ -f "$ASTATE" ]; then
    . "$ASTATE"
    for k in vm4 vm5 vm6; do
      eval "tap=\${${k}_TAP:-} h=\${${k}_HV:-}"
      [ -n "$tap" ] && { hv "$h"; vsctl --if-exists del-port br-int "$tap" 2>/dev/null || true; ip netns exec "$HVNS" ip link del "$tap" 2>/dev/null || true; }
    done
    for id in ${SUBC:-} ${SUBD:-}; do apiw PUT "/routers/$ROUTER/remove_router_interface" "{\"subnet_id\":\"$id\"}" >/dev/null 2>&1 || true; done
    for k in vm4 vm5 vm6; do eval "id=\${${k}_PORT:-}"; [ -n "$id" ] && apid "/ports/$id"; done
    for id in ${NETC:-} ${NETD:-}; do apid "/networks/$id"; done
    rm -f "$ASTATE"
  fi
  for k in vm4 vm5 vm6; do ip netns del "$VMPFX$k" 2>/dev/null || true; done
  return 0
}
mac_flows() { # N MAC: hvN's flows naming MAC (br-int, br-tun, br-phys)
  local b c=0 x; hv "$1"
  for b in br-int br-tun br-phys; do
    x=$(ofctl --no-stats dump-flows "$b" | grep -ciF "$2" || true); c=$((c + x))
  done
  echo "$c"
}
# netattrs SEG: a network's provider attributes for TENANT (VLAN: physnet1, SEG; tunnels: the type only,
# the server allocates the key/VNI)
netattrs() {
  if [ "$TENANT" = vlan ]; then printf '"provider:network_type":"vlan","provider:physical_network":"physnet1","provider:segmentation_id":%s' "$1"
  else printf '"provider:network_type":"%s"' "$TENANT"; fi
}
addon() { # OUT: C and D (VLAN: VLAN_C, VLAN_D) on the running scenario's router, vm4 C hv2, vm5 D hv3, vm6 C hv3
  local out=${1:-/tmp/refenv-dvr-$TENANT-addon-$RELEASE} NC ND SC SD t0 ok qrc before after h c x
  mkdir -p "$out"
  . "$STATE"
  aclean; : > "$ASTATE"
  NC=$(apiw POST /networks "{\"network\":{\"name\":\"netc\",\"project_id\":\"demo\",$(netattrs "$VLAN_C")}}" | jq -r .network.id)
  ND=$(apiw POST /networks "{\"network\":{\"name\":\"netd\",\"project_id\":\"demo\",$(netattrs "$VLAN_D")}}" | jq -r .network.id)
  { echo "NETC=$NC"; echo "NETD=$ND"; } >> "$ASTATE"
  SC=$(apiw POST /subnets "{\"subnet\":{\"name\":\"subc\",\"project_id\":\"demo\",\"network_id\":\"$NC\",\"ip_version\":4,\"cidr\":\"10.120.3.0/24\",\"enable_dhcp\":false}}" | jq -r .subnet.id)
  SD=$(apiw POST /subnets "{\"subnet\":{\"name\":\"subd\",\"project_id\":\"demo\",\"network_id\":\"$ND\",\"ip_version\":4,\"cidr\":\"10.120.4.0/24\",\"enable_dhcp\":false}}" | jq -r .subnet.id)
  { echo "SUBC=$SC"; echo "SUBD=$SD"; } >> "$ASTATE"
  log "networks C $NC ($(seglabel "$NC")), D $ND ($(seglabel "$ND"))"
  aplug vm4 "$NC" 2; aplug vm5 "$ND" 3; aplug vm6 "$NC" 3
  . "$ASTATE"
  t0=$(date +%s%N)
  apiw PUT "/routers/$ROUTER/add_router_interface" "{\"subnet_id\":\"$SC\"}" >/dev/null
  apiw PUT "/routers/$ROUTER/add_router_interface" "{\"subnet_id\":\"$SD\"}" >/dev/null
  ok=""; for _ in $(seq 1 90); do ip netns exec "${VMPFX}vm4" ping -c 1 -W 1 "$vm5_IP" >/dev/null 2>&1 && { ok=1; break; }; done
  log "router $ROUTER: interfaces C, D added; vm4 -> vm5 first answered after $(( ($(date +%s%N) - t0) / 1000000 )) ms ($([ -n "$ok" ] && echo ok || echo never))"
  [ -n "$ok" ] && pass "$TENANT networks added to the running router: vm4 -> vm5 answers" || fail "vm4 -> vm5 never answered after the interfaces were added"
  segment "$out" vm4 vm5 vm6 "$NC" "$ND"
  # the interfaces removed: no flow naming C's router port MAC is left on any host
  qrc=$(api "/ports?device_owner=network:router_interface_distributed&network_id=$NC" | jq -r '.ports[0].mac_address')
  before=""; for h in 1 2 3; do before="$before hv$h:$(mac_flows "$h" "$qrc")"; done
  apiw PUT "/routers/$ROUTER/remove_router_interface" "{\"subnet_id\":\"$SC\"}" >/dev/null
  apiw PUT "/routers/$ROUTER/remove_router_interface" "{\"subnet_id\":\"$SD\"}" >/dev/null
  sleep 8
  after=""; c=0; for h in 1 2 3; do x=$(mac_flows "$h" "$qrc"); after="$after hv$h:$x"; c=$((c + x)); done
  log "flows naming C's router port MAC $qrc before the removal:$before; 8 s after:$after"
  # meaningful only if C's router port was known and had flows on every host
  if ! grep -qE '^([0-9a-f]{2}:){5}[0-9a-f]{2}$' <<<"$qrc" || grep -qE ":0( |$)" <<<"$before "; then
    fail "C's router port ($qrc) had no flows on some host before the removal:$before"
  fi
  [ "$c" = 0 ] && pass "no flow of C's router port left after its removal" || fail "$c flows of C's removed router port left"
  aclean
}

# ---- IPv6: subnets A6, B6 on the scenario's networks A and B, on the router, vm1-3 addressed ----
V6STATE=/run/refenv/$RELEASE-dvr/dvr_v6.env
A6_CIDR=${A6_CIDR:-fd00:120:1::/64}; B6_CIDR=${B6_CIDR:-fd00:120:2::/64}
canon6() { python3 -c 'import ipaddress, sys; print(ipaddress.ip_address(sys.argv[1]))' "$1"; }
v6_up() { # the subnets (static addressing, no RA mode) on the router; each VM port gets an address
  # of its network's IPv6 subnet (a port update), configured in its namespace with the gateway as
  # default route; waits until vm1 -> vm2 answers
  local sa6 sb6 k pid net sub fips pj ip gw t0 ok
  . "$STATE"
  v6_clean; : > "$V6STATE"
  sa6=$(apiw POST /subnets "{\"subnet\":{\"name\":\"suba6\",\"project_id\":\"demo\",\"network_id\":\"$NETA\",\"ip_version\":6,\"cidr\":\"$A6_CIDR\",\"enable_dhcp\":false}}" | jq -r .subnet.id)
  sb6=$(apiw POST /subnets "{\"subnet\":{\"name\":\"subb6\",\"project_id\":\"demo\",\"network_id\":\"$NETB\",\"ip_version\":6,\"cidr\":\"$B6_CIDR\",\"enable_dhcp\":false}}" | jq -r .subnet.id)
  { echo "SUBA6=$sa6"; echo "SUBB6=$sb6"; } >> "$V6STATE"
  t0=$(date +%s%N)
  apiw PUT "/routers/$ROUTER/add_router_interface" "{\"subnet_id\":\"$sa6\"}" >/dev/null
  apiw PUT "/routers/$ROUTER/add_router_interface" "{\"subnet_id\":\"$sb6\"}" >/dev/null
  log "IPv6 subnets A6 $sa6 ($A6_CIDR), B6 $sb6 ($B6_CIDR) on the router; its ports: $(api "/ports?device_id=$ROUTER" | jq -c '[.ports[] | {o: .device_owner, m: .mac_address, ips: [.fixed_ips[].ip_address]}]')"
  for k in vm1 vm2 vm3; do
    eval "pid=\${${k}_PORT:-}"; [ -n "$pid" ] || continue
    net=$(api "/ports/$pid" | jq -r .port.network_id)
    sub=$sa6; [ "$net" = "$NETB" ] && sub=$sb6
    fips=$(api "/ports/$pid" | jq -c --arg s "$sub" '[.port.fixed_ips[] | {subnet_id, ip_address}] + [{subnet_id: $s}]')
    pj=$(apiw PUT "/ports/$pid" "{\"port\":{\"fixed_ips\":$fips}}")
    ip=$(canon6 "$(jq -r --arg s "$sub" '.port.fixed_ips[] | select(.subnet_id == $s) | .ip_address' <<<"$pj")")
    gw=$(api "/subnets/$sub" | jq -r .subnet.gateway_ip)
    ip netns exec "$VMPFX$k" sysctl -q -w net.ipv6.conf.eth0.accept_ra=0
    # a gateway address of an earlier IPv6 subnet may still be in the neighbour cache with
    # that subnet's router port MAC (gone): resolve afresh
    ip netns exec "$VMPFX$k" ip -6 neigh flush dev eth0
    ip netns exec "$VMPFX$k" ip -6 addr replace "$ip/64" dev eth0 nodad
    ip netns exec "$VMPFX$k" ip -6 route replace default via "$gw" dev eth0
    echo "${k}_IP6=$ip" >> "$V6STATE"
    log "$k: port $pid given $ip/64, default via $gw"
  done
  . "$V6STATE"
  ok=""; for _ in $(seq 1 120); do ip netns exec "${VMPFX}vm1" ping -c 1 -W 1 "$vm2_IP6" >/dev/null 2>&1 && { ok=1; break; }; done
  log "vm1 -> vm2 ($vm2_IP6) first answered $(( ($(date +%s%N) - t0) / 1000000 )) ms after the IPv6 interfaces were added ($([ -n "$ok" ] && echo ok || echo never))"
  [ -n "$ok" ] && pass "IPv6 subnets on the router: vm1 -> vm2 answers" || fail "vm1 -> vm2 over IPv6 never answered"
}
v6_qrmacs() { # the MACs of the router's distributed ports with an address of A6 or B6
  api "/ports?device_id=$ROUTER&device_owner=network:router_interface_distributed" |
    jq -r --arg a "$SUBA6" --arg b "$SUBB6" '.ports[] | select([.fixed_ips[].subnet_id] | index($a) or index($b)) | .mac_address'
}
ra_drops() { # N: hvN's br-tun flows dropping the router's IPv6 router advertisements (install_dvr_process_ipv6:
  # table 22; table 10's learning of RAs is the base pipeline's, it stays)
  hv "$1"; ofctl --no-stats dump-flows br-tun | grep "table=22," | grep -c "icmp_type=134" || true
}
v6_down() { # the IPv6 interfaces removed: no flow of their router ports nor an IPv6 RA drop left
  local before="" after="" c=0 h x m macs v4macs
  . "$STATE"; . "$V6STATE"
  macs=$(v6_qrmacs | sort -u)
  v4macs=$(api "/ports?device_id=$ROUTER&device_owner=network:router_interface_distributed" |
    jq -r --arg a "$SUBA6" --arg b "$SUBB6" '.ports[] | select([.fixed_ips[].subnet_id] | (index($a) or index($b)) | not) | .mac_address' | sort -u)
  for h in 1 2 3; do before="$before hv$h:$(ra_drops "$h")"; for m in $macs; do before="$before/$(mac_flows "$h" "$m")"; done; done
  apiw PUT "/routers/$ROUTER/remove_router_interface" "{\"subnet_id\":\"$SUBA6\"}" >/dev/null
  apiw PUT "/routers/$ROUTER/remove_router_interface" "{\"subnet_id\":\"$SUBB6\"}" >/dev/null
  sleep 8
  for h in 1 2 3; do
    x=$(ra_drops "$h"); after="$after hv$h:$x"; c=$((c + x))
    for m in $macs; do
      # a port that keeps an IPv4 address keeps its flows
      grep -qx "$m" <<<"$v4macs" && continue
      x=$(mac_flows "$h" "$m"); after="$after/$x"; c=$((c + x))
    done
  done
  log "IPv6 router ports $(echo $macs); RA drops / flows naming each port's MAC before the removal:$before; 8 s after:$after"
  # the check means something only if the flows were there: both IPv6 router ports known, an RA
  # drop and flows of each port on every host before the removal
  if [ "$(wc -w <<<"$macs")" != 2 ] || grep -qE "(:|/)0(/| |$)" <<<"$before "; then
    fail "IPv6 DVR flows not all there before the removal (ports: $(echo $macs);$before)"
  fi
  [ "$c" = 0 ] && pass "no IPv6 DVR flow left after the IPv6 interfaces' removal" || fail "$c IPv6 DVR flows left after the removal"
  v6_clean
}
v6_clean() { # the VMs' IPv6 addresses and ports' IPv6 fixed IPs, the IPv6 interfaces and subnets
  local k pid fips
  [ -f "$V6STATE" ] || return 0
  . "$STATE"; . "$V6STATE"
  for s in ${SUBA6:-} ${SUBB6:-}; do apiw PUT "/routers/$ROUTER/remove_router_interface" "{\"subnet_id\":\"$s\"}" >/dev/null 2>&1 || true; done
  for k in vm1 vm2 vm3; do
    eval "pid=\${${k}_PORT:-}"; [ -n "$pid" ] || continue
    fips=$(api "/ports/$pid" | jq -c --arg a "${SUBA6:-}" --arg b "${SUBB6:-}" '[.port.fixed_ips[] | select(.subnet_id != $a and .subnet_id != $b) | {subnet_id, ip_address}]') || continue
    apiw PUT "/ports/$pid" "{\"port\":{\"fixed_ips\":$fips}}" >/dev/null 2>&1 || true
    ip netns exec "$VMPFX$k" ip -6 addr flush dev eth0 scope global 2>/dev/null || true
    ip netns exec "$VMPFX$k" ip -6 neigh flush dev eth0 2>/dev/null || true
  done
  for s in ${SUBA6:-} ${SUBB6:-}; do apid "/subnets/$s"; done
  rm -f "$V6STATE"
}
v6() { # OUT: in a running environment (TestDVR's): v6_up, segment with the IPv6 addresses, v6_down
  local out=${1:-/tmp/refenv-dvr-v6-$RELEASE}
  v6_up
  IPK=IP6 segment "$out"
  v6_down
}

run() { # BIN OUT: the whole sequence, the environment torn down at the end (also on a failure)
  local bin=$1 out=$2 r=0
  mkdir -p "$out"
  export TENANT NHV=3 DVR_E2E_DIR=$out/e2e
  RUN_OUT=$out  # the trap runs after run() returned: no local in it
  trap 'aclean; v6_clean; "$HERE/dvr_e2e.sh" teardown > "$RUN_OUT/teardown.txt" 2>&1 || true; log "torn down ($RUN_OUT/teardown.txt)"' EXIT
  "$HERE/dvr_e2e.sh" up || r=1
  [ "${IPV6:-0}" = 1 ] && { v6_up || r=1; }
  "$HERE/dvr.sh" capture "$out/reference" || r=1
  segment "$out/segment-reference" || true
  [ "${IPV6:-0}" = 1 ] && { IPK=IP6 segment "$out/segment6-reference" || true; }
  "$HERE/dvr_e2e.sh" replace "$bin" 2 3 1 || r=1
  "$HERE/dvr_e2e.sh" check || r=1
  segment "$out/segment-ovs-agent" || true
  if [ "${IPV6:-0}" = 1 ]; then
    IPK=IP6 segment "$out/segment6-ovs-agent" || true
    NHV=3 "$HERE/dvr.sh" capture "$out/ovs-agent" || r=1
    v6_down || true
  else
    addon "$out/addon-ovs-agent" || true
    NHV=3 "$HERE/dvr.sh" capture "$out/ovs-agent" || r=1
  fi
  [ "$r" = 0 ] || FAILS=$((FAILS + 1))
}

cmd=${1:-}; shift || true
case "$cmd" in
  segment) segment "${1:-}" ;;
  run) run "$1" "$2" ;;
  addon) trap aclean EXIT; addon "${1:-}" ;;
  v6) trap v6_clean EXIT; v6 "${1:-}" ;;
  *) echo "usage: RELEASE=2026.2 [TENANT=vlan|gre|geneve|vxlan] [IPV6=1] $0 segment [OUT] | addon [OUT] | v6 [OUT] | run BIN OUT" >&2; exit 2 ;;
esac
[ "$FAILS" = 0 ] || { log "$FAILS failure(s)"; exit 1; }
