#!/bin/bash
# refenv/qos_capture.sh: the QoS golden scenario on a release's reference agent, captured.
#
#   RELEASE=2026.2 REFENV_AGENT_SET="agent.extensions=qos ovs.qos_meter_bandwidth=True" refenv/release.sh agent
#   RELEASE=2026.2 refenv/qos_capture.sh all DIR    # up, capture DIR/applied, change, capture DIR/changed, down
#   RELEASE=2026.2 refenv/qos_capture.sh up | capture DIR | change | down
#
# The reference agent (host refhv-<release>, private OVS in netns refenv-<release>) must run
# with `[agent] extensions = qos`; what [ovs] qos_meter_bandwidth says is recorded in DIR.
# Scenario (everything through the release's API, noauth, project demo):
#   qa1 on vxlan qosvx,    port policy qos-a: bandwidth_limit egress 10000/1000 kbps and ingress
#                          20000/2000, dscp_marking 26, packet_rate_limit egress 10/1 kpps and
#                          ingress 20/2
#   qa2 on vxlan qosnet,   no port policy; the network's qos-net: bandwidth_limit egress 5000 (no
#                          burst), dscp_marking 14
#   qa3 on vlan qosvlan (physnet1, 150), port policy qos-min: minimum_bandwidth egress 1000 and
#                          ingress 2000, minimum_packet_rate any 1000 kpps, bandwidth_limit ingress
#                          30000 (no burst)
#   qa4 on vxlan qosvx,    no policy at all
# Ports are plugged as os-vif does (veth tap<id[:11]> on br-int with iface-id, attached-mac,
# iface-status, vm-uuid; the peer stays in the OVS netns: no traffic is needed), and br-phys gets a
# "NIC" (veth qosnic0) so that the minimum-bandwidth QoS has a physical port to go on.
# change: qos-a's egress limit 10000 -> 8000 kbps and its dscp rule deleted; qa3's policy removed
# (qos_policy_id null); qa2's network policy removed.
# Only loopback (API) and the private OVS are touched.
set -euo pipefail
export PATH=/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin
HERE=$(cd "$(dirname "$0")" && pwd)
CAPTURE_NAME=qos_capture
SCENARIO=qos-scenario
# shellcheck source=lib/capture.sh
. "$HERE/lib/capture.sh"
INI=$REFENV_CHROOT/etc/neutron/refenv/openvswitch_agent.ini
NIC=qosnic0

policy() { # name -> id
  api POST /qos/policies "{\"policy\":{\"name\":\"$1\",\"project_id\":\"$PROJ\"}}" | jq -r .policy.id
}
rule() { # policy kind json-fields
  api POST "/qos/policies/$1/$2" "{\"${2%s}\":{$3}}" | jq -r ".${2%s}.id"
}
port() { # net name extra-json -> port json
  api POST /ports "{\"port\":{\"name\":\"$2\",\"project_id\":\"$PROJ\",\"network_id\":\"$1\",\"binding:host_id\":\"$REFENV_AGENT_HOST\",\"device_owner\":\"compute:nova\",\"device_id\":\"$(uuidgen)\"$3}}"
}

plug() { # key port-json
  local pid mac dev tap
  pid=$(jq -r .port.id <<<"$2"); mac=$(jq -r .port.mac_address <<<"$2"); dev=$(jq -r .port.device_id <<<"$2")
  tap="tap${pid:0:11}"
  vif_plug br-int "$tap" "$pid" "$mac" "$dev"
  save "${1}_PORT" "$pid"; save "${1}_TAP" "$tap"
  log "$1: port $pid ($mac) plugged as $tap"
}

wait_active() { # port ids...
  local p st i
  for p in "$@"; do
    for i in $(seq 1 600); do
      st=$(api GET "/ports/$p?fields=status" | jq -r .port.status)
      [ "$st" = ACTIVE ] && break
      sleep 0.2
    done
    [ "$st" = ACTIVE ] || { log "port $p not ACTIVE ($st)"; return 1; }
  done
  log "ports ACTIVE: $*"
}

up() {
  grep -Eq '^extensions *= *qos' "$INI" || { log "the reference agent's ini ($INI) has no 'extensions = qos': start it with REFENV_AGENT_SET=\"agent.extensions=qos ...\""; return 1; }
  [ ! -s "$STATE" ] || down
  # The private OVS's database outlives agent restarts, and the reference never removes a
  # minimum-bandwidth QoS of an earlier run (its external_ids:id, _min_bw_qos_id, is new at
  # every start; clear_bandwidth_qos looks for its own only): start from empty QoS/Queue tables.
  local p
  for p in $("${VSCTL[@]}" --bare --columns=name find Port 'qos!=[]'); do "${VSCTL[@]}" clear Port "$p" qos; done
  "${VSCTL[@]}" -- --all destroy QoS -- --all destroy Queue
  mkdir -p "$(dirname "$STATE")"; : > "$STATE"
  # a NIC on br-phys, so that get_bridge_ports('') finds one for the minimum-bandwidth QoS
  "${HVX[@]}" ip link del "$NIC" 2>/dev/null || true
  "${HVX[@]}" ip link add "$NIC" type veth peer name "${NIC}p"
  "${HVX[@]}" ip link set "$NIC" up; "${HVX[@]}" ip link set "${NIC}p" up
  "${VSCTL[@]}" --may-exist add-port br-phys "$NIC"

  local PA PN PM
  PA=$(policy qos-a); save POL_A "$PA"
  save RULE_A_BWE "$(rule "$PA" bandwidth_limit_rules '"max_kbps":10000,"max_burst_kbps":1000,"direction":"egress"')"
  save RULE_A_BWI "$(rule "$PA" bandwidth_limit_rules '"max_kbps":20000,"max_burst_kbps":2000,"direction":"ingress"')"
  save RULE_A_DSCP "$(rule "$PA" dscp_marking_rules '"dscp_mark":26')"
  save RULE_A_PRE "$(rule "$PA" packet_rate_limit_rules '"max_kpps":10,"max_burst_kpps":1,"direction":"egress"')"
  save RULE_A_PRI "$(rule "$PA" packet_rate_limit_rules '"max_kpps":20,"max_burst_kpps":2,"direction":"ingress"')"
  PN=$(policy qos-net); save POL_NET "$PN"
  rule "$PN" bandwidth_limit_rules '"max_kbps":5000,"direction":"egress"' >/dev/null
  rule "$PN" dscp_marking_rules '"dscp_mark":14' >/dev/null
  PM=$(policy qos-min); save POL_MIN "$PM"
  rule "$PM" minimum_bandwidth_rules '"min_kbps":1000,"direction":"egress"' >/dev/null
  rule "$PM" minimum_bandwidth_rules '"min_kbps":2000,"direction":"ingress"' >/dev/null
  rule "$PM" minimum_packet_rate_rules '"min_kpps":1000,"direction":"any"' >/dev/null
  rule "$PM" bandwidth_limit_rules '"max_kbps":30000,"direction":"ingress"' >/dev/null

  local VX QN VL
  VX=$(net qosvx ""); subnet "$VX" 10.110.0.0/24; save NET_VX "$VX"
  QN=$(net qosnet ",\"qos_policy_id\":\"$PN\""); subnet "$QN" 10.111.0.0/24; save NET_QN "$QN"
  VL=$(net qosvlan ",\"provider:network_type\":\"vlan\",\"provider:physical_network\":\"physnet1\",\"provider:segmentation_id\":150")
  subnet "$VL" 10.112.0.0/24; save NET_VL "$VL"

  local J1 J2 J3 J4
  J1=$(port "$VX" qa1 ",\"qos_policy_id\":\"$PA\""); plug qa1 "$J1"
  J2=$(port "$QN" qa2 ""); plug qa2 "$J2"
  J3=$(port "$VL" qa3 ",\"qos_policy_id\":\"$PM\""); plug qa3 "$J3"
  J4=$(port "$VX" qa4 ""); plug qa4 "$J4"
  . "$STATE"
  wait_active "$qa1_PORT" "$qa2_PORT" "$qa3_PORT" "$qa4_PORT"
  settle
}

# settle: the QoS extension applies after the port is wired; wait until two dumps a poll
# apart are equal (flows, meters, QoS and Queue rows), at most 180 s.
settle() { capture_settle 60; }
snapshot() {
  set -o pipefail
  OVS_RUNDIR=$REFENV_OVS_DIR ovs-ofctl -O OpenFlow13 --no-stats dump-flows br-int &&
  OVS_RUNDIR=$REFENV_OVS_DIR ovs-ofctl -O OpenFlow13 --no-stats dump-flows br-phys &&
  OVS_RUNDIR=$REFENV_OVS_DIR ovs-ofctl -O OpenFlow13 dump-meters br-int | grep -v 'stats:' &&
  "${VSCTL[@]}" list QoS && "${VSCTL[@]}" list Queue
}

change() {
  . "$STATE"
  api PUT "/qos/policies/$POL_A/bandwidth_limit_rules/$RULE_A_BWE" '{"bandwidth_limit_rule":{"max_kbps":8000}}' >/dev/null
  api DELETE "/qos/policies/$POL_A/dscp_marking_rules/$RULE_A_DSCP" >/dev/null
  api PUT "/ports/$qa3_PORT" '{"port":{"qos_policy_id":null}}' >/dev/null
  api PUT "/networks/$NET_QN" '{"network":{"qos_policy_id":null}}' >/dev/null
  log "changed: qos-a egress 8000, its dscp rule deleted; qa3 and qosnet without policy"
  sleep 3
  settle
}

capture() { # dir
  local D=$1
  capture_base "$D" || return 1
  ( cd "$D/ovs"
    export OVS_RUNDIR=$REFENV_OVS_DIR
    ovs-ofctl -O OpenFlow13 dump-meters br-int > meters-br-int.txt
    ovs-ofctl -O OpenFlow13 meter-features br-int > meter-features-br-int.txt
    "${VSCTL[@]}" list QoS > ovsdb-QoS.txt
    "${VSCTL[@]}" list Queue > ovsdb-Queue.txt
    "${VSCTL[@]}" --columns=name,qos,other_config,tag list Port > ovsdb-Port-qos.txt
    "${VSCTL[@]}" --columns=name,type,ofport,ingress_policing_rate,ingress_policing_burst,external_ids list Interface > ovsdb-Interface-qos.txt
  )
  api GET /qos/policies | jq . > "$D/api-qos-policies.json"
  cp "$STATE" "$D/scenario.env"
  { echo "# $INI"; grep -Ev '^\s*(#|$)' "$INI"; } > "$D/agent-ini.txt"
  log "captured into $D"
}

down() {
  [ -s "$STATE" ] || return 0
  . "$STATE"
  local k tap p
  for k in qa1 qa2 qa3 qa4; do
    eval "tap=\${${k}_TAP:-}; p=\${${k}_PORT:-}"
    [ -n "$tap" ] && { "${VSCTL[@]}" --if-exists del-port br-int "$tap"; "${HVX[@]}" ip link del "$tap" 2>/dev/null || true; }
    [ -n "$p" ] && api DELETE "/ports/$p" >/dev/null 2>&1 || true
  done
  for k in ${NET_VX:-} ${NET_QN:-} ${NET_VL:-}; do api DELETE "/networks/$k" >/dev/null 2>&1 || true; done
  for k in ${POL_A:-} ${POL_NET:-} ${POL_MIN:-}; do api DELETE "/qos/policies/$k" >/dev/null 2>&1 || true; done
  "${VSCTL[@]}" --if-exists del-port br-phys "$NIC"
  "${HVX[@]}" ip link del "$NIC" 2>/dev/null || true
  rm -f "$STATE"
  log "scenario removed"
}

case "${1:-}" in
  up) up ;;
  capture) capture "${2:?capture DIR}" ;;
  change) change ;;
  down) down ;;
  all) D=${2:?all DIR}; up; capture "$D/applied"; change; capture "$D/changed"; down ;;
  *) echo "usage: RELEASE=2026.2 $0 up | capture DIR | change | down | all DIR" >&2; exit 2 ;;
esac
