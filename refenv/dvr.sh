#!/bin/bash
# refenv dvr.sh — DVR with the real L3 agent (issue 16): the release's DVR server variant, the
# reference OVS agent with enable_distributed_routing on a private OVS hypervisor, the release's
# neutron-l3-agent (agent_mode dvr_snat) beside it as the same host, a provider namespace on
# br-phys playing the outside world, and a distributed router between two VXLAN subnets.
#
#   RELEASE=2026.2 refenv/dvr.sh up        server (VARIANT=dvr, API :9265), reference agent with
#                                          DVR, L3 agent, provider netns <release>-dvr-ext
#   RELEASE=2026.2 refenv/dvr.sh scenario  external flat network (physnet1, 203.0.113.0/24), subnets
#                                          A 10.120.1.0/24 and B 10.120.2.0/24 (vxlan), router
#                                          (distributed) with gateway and both interfaces, vm1 on A,
#                                          vm2 on B (netns <release>-dvr-vm1/2), a floating IP for vm2;
#                                          pings east-west, SNAT and to the floating IP
#   RELEASE=2026.2 refenv/dvr.sh capture [OUT]   flows, OVSDB rows, API objects, the L3 agent's
#                                          namespaces (default OUT /tmp/refenv-captures-<release>-dvr)
#   RELEASE=2026.2 refenv/dvr.sh rpc       the DVR RPCs' replies (dvr_rpc_probe.py) for hv1, subnet A
#   RELEASE=2026.2 refenv/dvr.sh ifbench [N]   N rounds of subnet A's router interface removed and
#                                          added back under vm1 -> vm2 pings: seconds to stop / flow again
#   RELEASE=2026.2 refenv/dvr.sh clean     the scenario's objects (API), VM and provider plumbing
#   RELEASE=2026.2 refenv/dvr.sh down      clean, then the L3 agent, the reference agent, its OVS,
#                                          the variant's server (by pid files)
# NHV=2 (or TWO=1): two hypervisors (the full DVR flow set needs a peer: other hosts' DVR MACs,
#   tunnels): hv1 refhv-<rel>-dvr (L3 agent dvr_snat, the network node, vm1 on A) and hv2
#   refhv-<rel>-dvr-hv2 (release.sh HV=2; L3 agent dvr, vm2 on B with the floating IP, vm3 on A).
# NHV=3: issue 16's topology: hv1 is the network node only (dvr_snat, no VM), hv2 and hv3 are
#   computes (dvr): vm1 on hv2 (A), vm2 (B, floating IP) and vm3 (A) on hv3; the capture also
#   records that the network node's underlay sees none of the east-west traffic.
# With NHV>1 each agent's local_ip is on its br-underlay (172.31.254.<n>/24, REFENV_UNDERLAY),
#   joined by veths und<n> to a Linux bridge in netns <rel>-dvr-und; the provider namespace
#   bridges every br-phys. Captures per hypervisor in OUT/hv<n>.
# Only loopback (API, AMQP) and addresses inside namespaces made here are used.
set -euo pipefail
export PATH=/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin
HERE=$(cd "$(dirname "$0")" && pwd)
RELEASE=${RELEASE:-2026.2}
export RELEASE VARIANT=dvr
unset MESSAGING
# the release's environment (the DVR variant's: VARIANT is exported), API, log, api (method path
# [json], project demo)
CAPTURE_NAME=dvr SCENARIO=dvr
# shellcheck source=lib/capture.sh
. "$HERE/lib/capture.sh"
# STATE (in place of lib/capture.sh's), VMPFX, EXTNS, UNDNS, EXT_GW; hv N: HOSTN, VSCTL, HVX, OVSD,
# HVNS of hypervisor N
# shellcheck source=lib/dvr.sh
. "$HERE/lib/dvr.sh"
TWO=${TWO:-0}
NHV=${NHV:-1}; [ "$TWO" = 1 ] && [ "$NHV" = 1 ] && NHV=2
case "$NHV" in [1-9]) ;; *) echo "dvr.sh: NHV=$NHV is not 1..9" >&2; exit 2 ;; esac
UNET=172.31.254
hv 1
HVS=$(seq -s " " 1 "$NHV")
EXT_CIDR=203.0.113.0/24
A_CIDR=10.120.1.0/24; B_CIDR=10.120.2.0/24
# the options issue 16 names for the reference agent (arp_responder is forced on with DVR anyway),
# and every tunnel type, so that GRE and Geneve tenant
# networks (TENANT, dvr_tenant.sh) work beside VXLAN ones in one environment
export REFENV_AGENT_SET=${REFENV_AGENT_SET:-"agent.enable_distributed_routing=True agent.l2_population=True agent.arp_responder=True agent.tunnel_types=vxlan,gre,geneve"}

now() { date +%s.%N; }
since() { printf %.2f "$(echo "$(now) - $1" | bc -l)"; }

ext_up() { # provider namespace: Linux bridge br0 ($EXT_GW) with ethN <-> veth dvrext-p on hvN's br-phys
  local n
  ip netns list | grep -qx "$EXTNS\( .*\)\?" || ip netns add "$EXTNS"
  ip netns exec "$EXTNS" ip link show br0 >/dev/null 2>&1 || ip netns exec "$EXTNS" ip link add br0 type bridge
  ip netns exec "$EXTNS" ip link set lo up
  for n in $HVS; do
    hv "$n"
    if ! "${HVX[@]}" ip link show dvrext-p >/dev/null 2>&1; then
      ip netns exec "$EXTNS" ip link del "eth$n" 2>/dev/null || true
      "${HVX[@]}" ip link add dvrext-p type veth peer name dvrext-e
      "${HVX[@]}" ip link set dvrext-e netns "$EXTNS"
      ip netns exec "$EXTNS" ip link set dvrext-e name "eth$n"
    fi
    ip netns exec "$EXTNS" ip link set "eth$n" master br0 up
    ip netns exec "$EXTNS" ethtool -K "eth$n" tx off >/dev/null 2>&1 || true
    "${HVX[@]}" ethtool -K dvrext-p tx off >/dev/null 2>&1 || true
    "${HVX[@]}" ip link set dvrext-p up
    "${VSCTL[@]}" --may-exist add-port br-phys dvrext-p
  done
  ip netns exec "$EXTNS" ip addr replace "$EXT_GW/24" dev br0
  ip netns exec "$EXTNS" ip link set br0 up
  ip netns exec "$EXTNS" ethtool -K br0 tx off >/dev/null 2>&1 || true
  hv 1
  log "provider netns $EXTNS: $EXT_GW/24 on br0, bridged to br-phys of hypervisor(s) $HVS (port dvrext-p)"
}

underlay_up() { # NHV>1: veth und<n> (on hv<n>'s br-underlay) <-> p<n> on bridge br0 in $UNDNS
  local n
  ip netns list | grep -qx "$UNDNS\( .*\)\?" || ip netns add "$UNDNS"
  ip netns exec "$UNDNS" ip link show br0 >/dev/null 2>&1 || ip netns exec "$UNDNS" ip link add br0 type bridge
  ip netns exec "$UNDNS" ip link set br0 up
  for n in $HVS; do
    hv "$n"
    if ! "${HVX[@]}" ip link show "und$n" >/dev/null 2>&1 || ! ip netns exec "$UNDNS" ip link show "p$n" >/dev/null 2>&1; then
      "${HVX[@]}" ip link del "und$n" 2>/dev/null || true; ip netns exec "$UNDNS" ip link del "p$n" 2>/dev/null || true
      ip link add "und$n" netns "$HVNS" type veth peer name "p$n" netns "$UNDNS"
    fi
    ip netns exec "$UNDNS" ip link set "p$n" master br0 up
    "${HVX[@]}" ip link set "und$n" arp off mtu 1500 up
    "${HVX[@]}" ethtool -K "und$n" tx off >/dev/null 2>&1 || true
    "${VSCTL[@]}" --may-exist add-port br-underlay "und$n"
  done
  hv 1
  for n in $HVS; do
    [ "$n" = 1 ] && continue
    "${HVX[@]}" ping -c 1 -W 2 "$UNET.$n" >/dev/null && log "underlay $UNET.1 <-> $UNET.$n answers" || log "underlay $UNET.$n does not answer"
  done
}

up() {
  local t0 t n ini mode set=$REFENV_AGENT_SET
  t0=$(now)
  AGENT=none "$HERE/setup.sh"
  for n in $HVS; do
    hv "$n"
    if [ "$NHV" -gt 1 ]; then
      # a hypervisor of the one-host set-up (local_ip 127.0.0.1) is restarted with its underlay
      ini=$REFENV_CHROOT/etc/neutron/refenv-dvr/openvswitch_agent$([ "$n" = 1 ] || echo "-hv$n").ini
      if [ -s "$ini" ] && ! grep -qx "local_ip = $UNET.$n" "$ini"; then HV=$n "$HERE/release.sh" agent-stop; fi
      export REFENV_UNDERLAY=$UNET.$n/24 REFENV_AGENT_SET="$set ovs.local_ip=$UNET.$n"
    fi
    mode=dvr_snat; [ "$n" = 1 ] || mode=dvr
    t=$(now); HV=$n "$HERE/release.sh" agent; log "hv$n: reference agent with DVR up in $(since "$t") s"
    t=$(now); HV=$n L3_AGENT_MODE=$mode "$HERE/release.sh" l3agent; log "hv$n: L3 agent ($mode) up in $(since "$t") s"
  done
  hv 1
  [ "$NHV" -gt 1 ] && underlay_up
  ext_up
  log "up in $(since "$t0") s"
}

wait_status() { # port-id status timeout-s -> prints seconds
  local t0 st i; t0=$(now)
  for i in $(seq 1 $(( $3 * 10 ))); do
    st=$(api GET "/ports/$1?fields=status" | jq -r .port.status)
    [ "$st" = "$2" ] && { since "$t0"; return 0; }
    sleep 0.1
  done
  echo "timeout($st)"; return 1
}

vm_no_redirects() { # netns conf...: accept_redirects and secure_redirects 0 on these net.ipv4.conf.<conf>
  local ns=$1 c k; shift
  for c in "$@"; do
    for k in accept_redirects secure_redirects; do ip netns exec "$ns" sysctl -q -w "net.ipv4.conf.$c.$k=0"; done
  done
}

plug() { # key port-json prefixlen gateway mtu hv: as os-vif ovs (non-hybrid) on hypervisor hv; waits ACTIVE
  local key=$1 pj=$2 plen=$3 gw=$4 mtu=$5
  hv "$6"
  local ns=$VMPFX$key pid mac dev ip tap
  pid=$(jq -r .port.id <<<"$pj"); mac=$(jq -r .port.mac_address <<<"$pj"); dev=$(jq -r .port.device_id <<<"$pj")
  ip=$(jq -r '.port.fixed_ips[0].ip_address' <<<"$pj"); tap="tap${pid:0:11}"
  ip netns add "$ns" 2>/dev/null || true
  # the test VMs route by their configured gateway only: no ICMP redirect taken (a qrouter
  # namespace sends them until its gateway is set, neutron's send_redirects=0 comes with it; one
  # made vm1 send east-west traffic to the csnat port on the network node for ~300 s)
  vm_no_redirects "$ns" all default
  "${HVX[@]}" ip link del "$tap" 2>/dev/null || true
  "${HVX[@]}" ip link add "$tap" mtu "$mtu" type veth peer name "v${pid:0:11}" mtu "$mtu"
  "${HVX[@]}" ip link set "v${pid:0:11}" netns "$ns"
  ip netns exec "$ns" ip link set "v${pid:0:11}" name eth0
  ip netns exec "$ns" ip link set eth0 address "$mac"
  vm_no_redirects "$ns" eth0
  ip netns exec "$ns" ip addr add "$ip/$plen" dev eth0
  ip netns exec "$ns" ip link set lo up
  ip netns exec "$ns" ip link set eth0 up
  ip netns exec "$ns" ip route replace default via "$gw"
  # userspace datapath + veth: no tx checksum offload, or TCP/UDP break (ICMP does not care)
  ip netns exec "$ns" ethtool -K eth0 tx off >/dev/null 2>&1 || true
  "${HVX[@]}" ethtool -K "$tap" tx off >/dev/null 2>&1 || true
  "${HVX[@]}" ip link set "$tap" up
  "${VSCTL[@]}" -- --may-exist add-port br-int "$tap" -- set Interface "$tap" \
     external_ids:iface-id="$pid" external_ids:attached-mac="$mac" \
     external_ids:iface-status=active external_ids:vm-uuid="$dev"
  log "$ns: port $pid ($ip, $mac, $tap) ACTIVE after $(wait_status "$pid" ACTIVE 60) s"
  { echo "${key}_PORT=$pid"; echo "${key}_TAP=$tap"; echo "${key}_IP=$ip"; echo "${key}_MAC=$mac"; echo "${key}_HV=$6"; } >> "$STATE"
  hv 1
}

clean() {
  local id r s
  if [ "$(curl -s -o /dev/null -w '%{http_code}' "$API/networks" || true)" = 200 ]; then
    for id in $(api GET /floatingips | jq -r '.floatingips[].id'); do api DELETE "/floatingips/$id" >/dev/null || true; done
    for r in $(api GET /routers | jq -r '.routers[].id'); do
      for s in $(api GET "/ports?device_id=$r&device_owner=network:router_interface_distributed" | jq -r '.ports[].fixed_ips[].subnet_id'); do
        api PUT "/routers/$r/remove_router_interface" "{\"subnet_id\":\"$s\"}" >/dev/null || true
      done
      api PUT "/routers/$r" '{"router":{"external_gateway_info":{}}}' >/dev/null || true
      api DELETE "/routers/$r" >/dev/null || log "router $r not deleted"
    done
    for id in $(api GET "/ports?device_owner=compute:nova" | jq -r '.ports[].id'); do api DELETE "/ports/$id" >/dev/null || true; done
    for id in $(api GET /networks | jq -r '.networks[].id'); do api DELETE "/networks/$id" >/dev/null || log "network $id not deleted"; done
  fi
  if [ -f "$STATE" ]; then
    . "$STATE"
    for k in vm1 vm2 vm3; do
      eval "tap=\${${k}_TAP:-}"; eval "h=\${${k}_HV:-1}"; hv "$h"
      [ -n "$tap" ] && { "${VSCTL[@]}" --if-exists del-port br-int "$tap" 2>/dev/null || true; "${HVX[@]}" ip link del "$tap" 2>/dev/null || true; }
    done
    rm -f "$STATE"; hv 1
  fi
  for k in vm1 vm2 vm3; do ip netns del "$VMPFX$k" 2>/dev/null && log "netns $VMPFX$k deleted"; done
  return 0
}

# TENANT=vlan: subnets A and B on VLAN networks of physnet1 (VLAN_A, VLAN_B) instead of vxlan;
# the hypervisors' br-phys share the outside's Linux bridge br0 (no vlan_filtering: it forwards
# the tagged frames between them, the flat external network stays untagged). TENANT=gre|geneve:
# A and B of that type (the server allocates the key/VNI; the agents have every tunnel type)
TENANT=${TENANT:-vxlan}; VLAN_A=${VLAN_A:-1101}; VLAN_B=${VLAN_B:-1102}
# checked here: tenant_provider runs inside $(...) of a JSON argument, where set -e sees no failure
case "$TENANT" in vxlan|vlan|gre|geneve) ;; *) echo "dvr.sh: TENANT=$TENANT is not vxlan, vlan, gre or geneve" >&2; exit 2 ;; esac
tenant_provider() { # segmentation id: the provider attributes of a tenant network (none for vxlan)
  case "$TENANT" in
    vlan) printf ',"provider:network_type":"vlan","provider:physical_network":"physnet1","provider:segmentation_id":%s' "$1" ;;
    gre|geneve) printf ',"provider:network_type":"%s"' "$TENANT" ;;
    vxlan) ;;
    *) echo "dvr.sh: TENANT=$TENANT is not vxlan, vlan, gre or geneve" >&2; return 1 ;;
  esac
}

scenario() {
  local t0 EXT EXTSUB NA NB SA SB R MTU P1 P2 FIP
  clean
  mkdir -p "$(dirname "$STATE")"; : > "$STATE"
  ext_up
  log "agents:"; api GET /agents | jq -r '.agents[] | "  \(.binary) host=\(.host) alive=\(.alive) mode=\(.configurations.agent_mode // "-")"'
  EXT=$(api POST /networks "{\"network\":{\"name\":\"ext\",\"project_id\":\"$PROJ\",\"router:external\":true,\"provider:network_type\":\"flat\",\"provider:physical_network\":\"physnet1\"}}" | jq -r .network.id)
  EXTSUB=$(api POST /subnets "{\"subnet\":{\"name\":\"extsub\",\"project_id\":\"$PROJ\",\"network_id\":\"$EXT\",\"ip_version\":4,\"cidr\":\"$EXT_CIDR\",\"gateway_ip\":\"$EXT_GW\",\"enable_dhcp\":false,\"allocation_pools\":[{\"start\":\"203.0.113.10\",\"end\":\"203.0.113.99\"}]}}" | jq -r .subnet.id)
  NA=$(api POST /networks "{\"network\":{\"name\":\"neta\",\"project_id\":\"$PROJ\"$(tenant_provider "$VLAN_A")}}" | jq -r .network.id)
  NB=$(api POST /networks "{\"network\":{\"name\":\"netb\",\"project_id\":\"$PROJ\"$(tenant_provider "$VLAN_B")}}" | jq -r .network.id)
  SA=$(api POST /subnets "{\"subnet\":{\"name\":\"suba\",\"project_id\":\"$PROJ\",\"network_id\":\"$NA\",\"ip_version\":4,\"cidr\":\"$A_CIDR\",\"enable_dhcp\":false}}" | jq -r .subnet.id)
  SB=$(api POST /subnets "{\"subnet\":{\"name\":\"subb\",\"project_id\":\"$PROJ\",\"network_id\":\"$NB\",\"ip_version\":4,\"cidr\":\"$B_CIDR\",\"enable_dhcp\":false}}" | jq -r .subnet.id)
  { echo "EXTNET=$EXT"; echo "EXTSUB=$EXTSUB"; echo "NETA=$NA"; echo "NETB=$NB"; echo "SUBA=$SA"; echo "SUBB=$SB"; } >> "$STATE"
  api GET /networks | jq -r '.networks[] | "  network \(.name) \(.id) \(."provider:network_type") \(."provider:segmentation_id" // "-") mtu \(.mtu)"'
  # the default group admits its members only: ICMP and TCP from outside for the floating IP
  local SG; SG=$(api GET "/security-groups?name=default&project_id=$PROJ" | jq -r '.security_groups[0].id')
  for proto in icmp tcp; do
    api POST /security-group-rules "{\"security_group_rule\":{\"project_id\":\"$PROJ\",\"security_group_id\":\"$SG\",\"direction\":\"ingress\",\"ethertype\":\"IPv4\",\"protocol\":\"$proto\",\"remote_ip_prefix\":\"0.0.0.0/0\"}}" >/dev/null 2>&1 || true
  done
  # VMs first (the router is scheduled to a DVR host once it has a DVR-serviced port there)
  MTU=$(api GET "/networks/$NA" | jq -r .network.mtu)
  # placement: NHV=1 all on hv1; 2: vm1 hv1, vm2 and vm3 hv2; 3+: vm1 hv2, vm2 and vm3 hv3
  local h1=1 h2=1 host1 host2
  [ "$NHV" = 2 ] && h2=2
  [ "$NHV" -ge 3 ] && { h1=2; h2=3; }
  hv "$h1"; host1=$HOSTN; hv "$h2"; host2=$HOSTN; hv 1
  P1=$(api POST /ports "{\"port\":{\"name\":\"vm1-port\",\"project_id\":\"$PROJ\",\"network_id\":\"$NA\",\"binding:host_id\":\"$host1\",\"device_owner\":\"compute:nova\",\"device_id\":\"$(uuidgen)\"}}")
  P2=$(api POST /ports "{\"port\":{\"name\":\"vm2-port\",\"project_id\":\"$PROJ\",\"network_id\":\"$NB\",\"binding:host_id\":\"$host2\",\"device_owner\":\"compute:nova\",\"device_id\":\"$(uuidgen)\"}}")
  plug vm1 "$P1" 24 10.120.1.1 "$MTU" "$h1"
  plug vm2 "$P2" 24 10.120.2.1 "$MTU" "$h2"
  if [ "$NHV" -gt 1 ]; then
    # vm3: subnet A on vm2's host without a floating IP: its way out is the central SNAT on hv1
    local P3
    P3=$(api POST /ports "{\"port\":{\"name\":\"vm3-port\",\"project_id\":\"$PROJ\",\"network_id\":\"$NA\",\"binding:host_id\":\"$host2\",\"device_owner\":\"compute:nova\",\"device_id\":\"$(uuidgen)\"}}")
    plug vm3 "$P3" 24 10.120.1.1 "$MTU" "$h2"
  fi
  t0=$(now)
  R=$(api POST /routers "{\"router\":{\"name\":\"dvr1\",\"project_id\":\"$PROJ\",\"external_gateway_info\":{\"network_id\":\"$EXT\"}}}" | jq -r .router.id)
  echo "ROUTER=$R" >> "$STATE"
  api GET "/routers/$R" | jq -c '.router | {id,distributed,ha,status,external_gateway_info}'
  api PUT "/routers/$R/add_router_interface" "{\"subnet_id\":\"$SA\"}" >/dev/null
  api PUT "/routers/$R/add_router_interface" "{\"subnet_id\":\"$SB\"}" >/dev/null
  log "router $R: gateway and interfaces A, B added ($(since "$t0") s)"
  # east-west: vm1 -> vm2 through the distributed router on this host
  local i ok=""
  for i in $(seq 1 60); do
    ip netns exec "${VMPFX}vm1" ping -c 1 -W 1 "$(grep ^vm2_IP= "$STATE" | cut -d= -f2)" >/dev/null 2>&1 && { ok=1; break; }
  done
  log "east-west vm1 -> vm2 first answered $(since "$t0") s after the router was created ($([ -n "$ok" ] && echo ok || echo FAIL))"
  echo "EW_FIRST=$([ -n "$ok" ] && echo "$(since "$t0")" || echo FAIL)" >> "$STATE"
  FIP=$(api POST /floatingips "{\"floatingip\":{\"project_id\":\"$PROJ\",\"floating_network_id\":\"$EXT\",\"port_id\":\"$(jq -r .port.id <<<"$P2")\"}}" | jq -r .floatingip.floating_ip_address)
  echo "FIP=$FIP" >> "$STATE"
  log "floating IP $FIP for vm2"
  . "$STATE"
  check
}

check() { # the pings the capture is taken after
  . "$STATE"
  local r=0
  log "east-west vm1 ($vm1_IP, hv$vm1_HV) -> vm2 ($vm2_IP, hv$vm2_HV)"; ip netns exec "${VMPFX}vm1" ping -c 3 -W 2 -i 0.3 "$vm2_IP" | tail -2 || r=1
  log "SNAT vm1 -> outside $EXT_GW";            ip netns exec "${VMPFX}vm1" ping -c 3 -W 2 -i 0.3 "$EXT_GW" | tail -2 || r=1
  if [ -n "${vm3_IP:-}" ]; then
    log "vm1 ($vm1_IP, hv$vm1_HV) -> vm3 ($vm3_IP, hv$vm3_HV): one subnet, two hosts"; ip netns exec "${VMPFX}vm1" ping -c 3 -W 2 -i 0.3 "$vm3_IP" | tail -2 || r=1
    log "vm3 (hv$vm3_HV) -> vm2 (hv$vm2_HV): routed on hv$vm3_HV";  ip netns exec "${VMPFX}vm3" ping -c 3 -W 2 -i 0.3 "$vm2_IP" | tail -2 || r=1
    log "SNAT vm3 (hv$vm3_HV) -> outside $EXT_GW through hv1"; ip netns exec "${VMPFX}vm3" ping -c 3 -W 2 -i 0.3 "$EXT_GW" | tail -2 || r=1
  fi
  local i ok=""
  for i in $(seq 1 30); do ip netns exec "$EXTNS" ping -c 1 -W 1 "$FIP" >/dev/null 2>&1 && { ok=1; break; }; done
  log "outside -> floating IP $FIP of vm2";      ip netns exec "$EXTNS" ping -c 3 -W 2 -i 0.3 "$FIP" | tail -2 || r=1
  return $r
}

capture() {
  local C=${1:-/tmp/refenv-captures-$RELEASE-dvr} b t n d
  for n in $HVS; do
  hv "$n"; d=$C/ovs; [ "$NHV" -gt 1 ] && d=$C/hv$n/ovs
  mkdir -p "$d"
  (
    export OVS_RUNDIR=$OVSD
    cd "$d"
    ovs-vsctl show > ovs-vsctl-show.txt
    for b in br-int br-tun br-phys; do
      ovs-ofctl -O OpenFlow13 dump-flows $b > flows-$b.txt
      ovs-ofctl -O OpenFlow13 --no-stats dump-flows $b > flows-$b.nostats.txt
      ovs-ofctl -O OpenFlow13 show $b > ofctl-show-$b.txt
    done
    ovs-vsctl --columns=name,tag,vlan_mode,trunks,other_config,external_ids list Port > ovsdb-Port.txt
    ovs-vsctl --columns=name,type,ofport,mac_in_use,mtu,options,external_ids,admin_state,link_state list Interface > ovsdb-Interface.txt
    ovs-vsctl --columns=name,datapath_type,fail_mode,protocols,other_config,external_ids,controller list Bridge > ovsdb-Bridge.txt
    for t in $(ovs-vsctl list-ports br-int); do
      echo "== $t"; ovs-vsctl --columns=name,tag,other_config list Port "$t"
      ovs-vsctl --columns=ofport,external_ids list Interface "$t"
    done > br-int-ports.txt
  )
  HV=$n "$HERE/release.sh" l3exec sh -c 'for n in $(ip netns | cut -d" " -f1 | sort); do echo "### $n"; ip netns exec $n ip -br addr; ip netns exec $n ip route; ip netns exec $n ip rule | grep -v "^0:\|^3276[67]:"; done; true' > "$d/../l3-namespaces.txt" 2>&1
  done
  hv 1
  for t in agents routers ports networks subnets floatingips; do api GET "/$t" | jq . > "$C/api-$t.json"; done
  # the DVR MACs the server gave each host (no API: the table dvr_host_macs)
  mysql -N -e "SELECT host, mac_address FROM $REFENV_DB.dvr_host_macs ORDER BY host" > "$C/dvr_host_macs.txt"
  if [ "$NHV" -gt 1 ] && [ -f "$STATE" ]; then
    # what crosses the underlay for vm1 (A) -> vm2 (B), on vm1's host: the inner source MAC is
    # the sending host's DVR MAC, never the router's qr- MAC (routed on the sending host);
    # with a network node of its own (NHV>=3), its underlay port sees none of it
    . "$STATE"; hv "$vm1_HV"
    local tf="udp port 4789 or udp port 6081 or ip proto 47"  # VXLAN, Geneve, GRE
    "${HVX[@]}" timeout 8 tcpdump -nn -e -l -i "und$vm1_HV" -c 4 "$tf" > "$C/underlay-vm1-vm2.txt" 2>&1 &
    if [ "$vm1_HV" != 1 ]; then
      hv 1; "${HVX[@]}" timeout 8 tcpdump -nn -e -l -i und1 "$tf" > "$C/underlay-network-node-during-vm1-vm2.txt" 2>&1 &
    fi
    sleep 2; ip netns exec "${VMPFX}vm1" ping -c 2 -i 0.3 "$vm2_IP" > /dev/null || true; wait; hv 1
  fi
  # uuids of this run, for reading the flows
  [ -f "$STATE" ] && cp "$STATE" "$C/scenario.env"
  log "captures written to $C"
}

# l3wait H MODE GW OUT: in the background, until hvH's L3 agent has (MODE=up) / no longer has
# (MODE=down) the router's qr- device with GW in its qrouter namespace (the L3 agent's part of
# a router interface: the device plugged, moved into the namespace, up, addressed), polled every
# 0.05 s; OUT gets the epoch seconds of that moment, or "never" after 2400 polls (up) / 200 (down:
# hv2's L3 agent keeps qr-A after the removal, vm1 being its only port on A). Up waits for a qr-
# device with GW that the namespace did not have when the poll started.
l3wait() {
  local max=2400; [ "$2" = down ] && max=200
  # up: a device that was not there at the start (hv2's L3 agent keeps the removed qr-A, same IP)
  HV=$1 "$HERE/release.sh" l3exec sh -c 'i=0; old=""
    [ "$2" = up ] && old=$(ip netns exec "qrouter-$1" ip -o -4 addr show 2>/dev/null | grep " inet $3/" | cut -d" " -f2)
    while [ $i -lt $4 ]; do
      h=0; for d in $(ip netns exec "qrouter-$1" ip -o -4 addr show 2>/dev/null | grep " inet $3/" | cut -d" " -f2); do
        case " $(echo $old) " in *" $d "*) ;; *) h=1 ;; esac; done
      case "$2$h" in up1|down0) date +%s.%N; exit 0 ;; esac
      i=$((i + 1)); sleep 0.05
    done; echo never' sh "$ROUTER" "$2" "$3" "$max" > "$4" 2>/dev/null &
  L3WAITS="${L3WAITS:-} $!"
}
# l3floor T0 OUT...: wait for the l3wait pollers; seconds from T0 to the earliest (L3FIRST) and
# the latest (L3LAST) of them, each host's in L3EACH ("never": a poller saw nothing in 120 s)
l3floor() {
  local t0=$1 f p v lo="" hi="" each=""; shift
  for p in ${L3WAITS:-}; do wait "$p" || true; done; L3WAITS=""
  for f in "$@"; do
    v=$(cat "$f" 2>/dev/null || true)
    case "$v" in ""|never) each="$each never"; hi=never; continue ;; esac
    v=$(printf %.2f "$(echo "$v - $t0" | bc -l)"); each="$each $v"
    { [ -z "$lo" ] || [ "$(echo "$v < $lo" | bc -l)" = 1 ]; } && lo=$v
    [ "$hi" != never ] && { [ -z "$hi" ] || [ "$(echo "$v > $hi" | bc -l)" = 1 ]; } && hi=$v
  done
  L3EACH=${each# }; L3FIRST=${lo:-never}; L3LAST=${hi:-never}
}

ifbench() { # N rounds: remove subnet A's router interface (B's is held by vm2's floating IP: 409), add it back; seconds until
  # vm1 -> vm2 stops / answers again (a ping every 0.2 s), and the DVR flows left on vm1's host
  # after each removal (the reference's table-3 leak, docs/dvr.md). Beside each, the floor, the
  # part no OVS agent can shorten: added, the seconds until the L3 agents of vm1's and vm2's hosts
  # both have the qr- device with A's gateway IP in the qrouter namespace (l3wait; the later of
  # the two: vm1 needs its gateway on its host, vm2's answer A's on vm2's host; the OVS agent then
  # tags the new qr- ports and sets their DVR flows). Removed: until the first of the two hosts'
  # qr- device is gone, for information (not a floor: the pings stop before it)
  . "$STATE"
  local i t0 ok n=${1:-3} d tr fl gwa w=/tmp/refenv-dvr-ifbench.$$ h1=$vm1_HV h2=$vm2_HV
  gwa=$(api GET "/subnets/$SUBA" | jq -r .subnet.gateway_ip)
  hv "$vm1_HV"
  for i in $(seq 1 "$n"); do
    l3wait "$h1" down "$gwa" "$w.1"; l3wait "$h2" down "$gwa" "$w.2"; sleep 1 # the pollers polling
    t0=$(now)
    api PUT "/routers/$ROUTER/remove_router_interface" "{\"subnet_id\":\"$SUBA\"}" >/dev/null
    ok=""; for _ in $(seq 1 300); do ip netns exec "${VMPFX}vm1" ping -c 1 -W 0.2 "$vm2_IP" >/dev/null 2>&1 || { ok=1; break; }; done
    tr=$(since "$t0"); l3floor "$t0" "$w.1" "$w.2"
    log "round $i: interface A removed, vm1 -> vm2 stopped after $tr s ($([ -n "$ok" ] && echo ok || echo STILL-ANSWERS)); L3 agents: qr- gone from the first qrouter namespace after $L3FIRST s (hv$h1 hv$h2: $L3EACH s)"
    sleep 5
    # table-3 flows whose output port is gone (the removed qr- ports', left by the reference),
    # on every hypervisor
    local h gone=""
    for h in $HVS; do
      hv "$h"
      d=$(OVS_RUNDIR=$OVSD sh -c 'ports=$(ovs-ofctl -O OpenFlow13 show br-int | sed -n "s/^ *\([0-9]*\)(.*/\1/p"); ovs-ofctl -O OpenFlow13 --no-stats dump-flows br-int table=3 |
        while read -r l; do o=${l##*output:}; case "$o" in *[!0-9]*|"") continue ;; esac; echo "$ports" | grep -qx "$o" || echo "$l"; done' | grep -c . || true)
      gone="$gone hv$h:$d"
    done
    hv "$vm1_HV"
    log "round $i: br-int table-3 flows pointing at a port that is gone:$gone"
    l3wait "$h1" up "$gwa" "$w.1"; l3wait "$h2" up "$gwa" "$w.2"; sleep 1
    t0=$(now)
    api PUT "/routers/$ROUTER/add_router_interface" "{\"subnet_id\":\"$SUBA\"}" >/dev/null
    ok=""; for _ in $(seq 1 600); do ip netns exec "${VMPFX}vm1" ping -c 1 -W 0.2 "$vm2_IP" >/dev/null 2>&1 && { ok=1; break; }; done
    tr=$(since "$t0"); l3floor "$t0" "$w.1" "$w.2"
    log "round $i: interface A added, vm1 -> vm2 answered after $tr s ($([ -n "$ok" ] && echo ok || echo FAIL)); floor $L3LAST s (qr- with $gwa in the qrouter namespace, hv$h1 hv$h2: $L3EACH s)"
  done
  rm -f "$w.1" "$w.2"
  hv 1
}

rpc() { # the DVR RPCs' replies for hv1 and subnet A (router interface port of A): dvr_rpc_probe.py
  . "$STATE"
  local qr
  qr=$(api GET "/ports?device_owner=network:router_interface_distributed&network_id=$NETA" | jq -r '.ports[0].id')
  chroot "$REFENV_CHROOT" python3 - /etc/neutron/refenv-dvr/neutron.conf "$HOSTN" "$SUBA" "$qr" \
    < "$HERE/dvr_rpc_probe.py"
}

down() {
  local n
  clean
  ip netns del "$EXTNS" 2>/dev/null && log "netns $EXTNS deleted"
  ip netns del "$UNDNS" 2>/dev/null && log "netns $UNDNS deleted"
  # every hypervisor that has a pid directory, the others before hv1 (whose stop takes the server)
  for n in 9 8 7 6 5 4 3 2; do [ -d "/run/refenv/$RELEASE-dvr/hv$n" ] && HV=$n "$HERE/release.sh" agent-stop; done
  "$HERE/release.sh" stop
}

case "${1:-}" in
  up) up ;;
  scenario) scenario ;;
  check) check ;;
  capture) capture "${2:-}" ;;
  rpc) rpc ;;
  ifbench) ifbench "${2:-3}" ;;
  clean) clean ;;
  down) down ;;
  *) echo "usage: RELEASE=2026.2 [NHV=1..9] $0 up|scenario|check|capture [OUT]|rpc|ifbench [N]|clean|down" >&2; exit 2 ;;
esac
