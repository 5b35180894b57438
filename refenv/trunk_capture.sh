#!/bin/bash
# refenv/trunk_capture.sh: a trunk (vlan-aware VM) on a release's reference agent, captured.
#
#   RELEASE=2026.2 refenv/release.sh agent                  # the reference agent (trunk handler always on)
#   RELEASE=2026.2 refenv/trunk_capture.sh all DIR          # up, capture DIR/wired, unplug, capture DIR/unplugged, down
#   RELEASE=2026.2 refenv/trunk_capture.sh up | capture DIR | unplug | down
#
# Scenario (the release's API, noauth, project demo): a vxlan network trkparent with the parent
# port, a vxlan network trksub1 and a VLAN network trksub2 (physnet1, 160; MTU set to the vxlan
# parent's 1450: the server refuses a subport whose MTU exceeds the parent's) with one port each; a
# trunk on the parent with both ports as subports (segmentation vlan 101 and 102), then the parent
# bound to the host. Plugged as os-vif plugs a vlan-aware VM: bridge tbr-<trunk id>[:14] (datapath
# netdev), the VM's tap (a veth, peer left in the OVS netns) on it with iface-id, attached-mac,
# iface-status, vm-uuid of the parent. The reference's trunk handler then patches the parent and
# the subports into br-int and the agent wires them. "unplug" deletes the VM's tap and the trunk
# bridge (os-vif's unplug); "down" unbinds the parent, deletes the trunk, ports and networks.
set -euo pipefail
export PATH=/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin
HERE=$(cd "$(dirname "$0")" && pwd)
CAPTURE_NAME=trunk_capture
SCENARIO=trunk-scenario
# shellcheck source=lib/capture.sh
. "$HERE/lib/capture.sh"

port() { # net name extra-json -> port json
  api POST /ports "{\"port\":{\"name\":\"$2\",\"project_id\":\"$PROJ\",\"network_id\":\"$1\"$3}}"
}
wait_status() { # path field want
  local st="" i
  for i in $(seq 1 300); do
    st=$(api GET "$1" | jq -r "$2")
    [ "$st" = "$3" ] && return 0
    sleep 0.2
  done
  log "$1: $2=$st, not $3"; return 1
}

up() {
  [ ! -s "$STATE" ] || down
  mkdir -p "$(dirname "$STATE")"; : > "$STATE"
  local PN S1N S2N PJ S1J S2J PARENT S1 S2 TRUNK DEV MAC BR TAP
  PN=$(net trkparent ""); subnet "$PN" 10.120.0.0/24; save NET_P "$PN"
  S1N=$(net trksub1 ""); subnet "$S1N" 10.121.0.0/24; save NET_S1 "$S1N"
  S2N=$(net trksub2 ",\"provider:network_type\":\"vlan\",\"provider:physical_network\":\"physnet1\",\"provider:segmentation_id\":160,\"mtu\":1450")
  subnet "$S2N" 10.122.0.0/24; save NET_S2 "$S2N"
  DEV=$(uuidgen)
  PJ=$(port "$PN" trkparent "")
  PARENT=$(jq -r .port.id <<<"$PJ"); MAC=$(jq -r .port.mac_address <<<"$PJ"); save PARENT "$PARENT"
  # subports carry the parent's MAC, as nova creates them for a vlan-aware VM
  S1J=$(port "$S1N" trksub1 ",\"mac_address\":\"$MAC\""); S1=$(jq -r .port.id <<<"$S1J"); save SUB1 "$S1"
  S2J=$(port "$S2N" trksub2 ",\"mac_address\":\"$MAC\""); S2=$(jq -r .port.id <<<"$S2J"); save SUB2 "$S2"
  TRUNK=$(api POST /trunks "{\"trunk\":{\"name\":\"trk\",\"project_id\":\"$PROJ\",\"port_id\":\"$PARENT\",\"sub_ports\":[{\"port_id\":\"$S1\",\"segmentation_type\":\"vlan\",\"segmentation_id\":101},{\"port_id\":\"$S2\",\"segmentation_type\":\"vlan\",\"segmentation_id\":102}]}}" | jq -r .trunk.id)
  save TRUNK "$TRUNK"
  # nova binds the parent once the trunk exists (the binding then names the trunk bridge)
  api PUT "/ports/$PARENT" "{\"port\":{\"binding:host_id\":\"$REFENV_AGENT_HOST\",\"device_owner\":\"compute:nova\",\"device_id\":\"$DEV\"}}" >/dev/null
  BR=$(api GET "/ports/$PARENT" | jq -r '.port."binding:vif_details".bridge_name // empty')
  [ -n "$BR" ] || BR="tbr-${TRUNK:0:10}"
  save BRIDGE "$BR"
  TAP="tap${PARENT:0:11}"; save TAP "$TAP"
  log "trunk $TRUNK parent $PARENT ($MAC) subports $S1 (101) $S2 (102), bridge $BR"
  # os-vif: the trunk bridge, then the VM's tap on it
  "${VSCTL[@]}" --may-exist add-br "$BR" -- set Bridge "$BR" datapath_type=netdev
  vif_plug "$BR" "$TAP" "$PARENT" "$MAC" "$DEV"
  wait_status "/ports/$PARENT" .port.status ACTIVE
  wait_status "/ports/$S1" .port.status ACTIVE
  wait_status "/ports/$S2" .port.status ACTIVE
  wait_status "/trunks/$TRUNK" .trunk.status ACTIVE
  log "parent, subports and trunk ACTIVE"
  settle
}

settle() { capture_settle 40; }
snapshot() {
  local b
  for b in $("${VSCTL[@]}" list-br); do
    OVS_RUNDIR=$REFENV_OVS_DIR ovs-ofctl -O OpenFlow13 --no-stats dump-flows "$b" || return 1
  done
  "${VSCTL[@]}" list Port && "${VSCTL[@]}" list Interface
}

capture() { # dir
  local D=$1 b
  capture_base "$D" || return 1
  ( cd "$D/ovs"
    export OVS_RUNDIR=$REFENV_OVS_DIR
    for b in $("${VSCTL[@]}" list-br | grep '^tbr-'); do
      ovs-ofctl -O OpenFlow13 --no-stats dump-flows "$b" > "flows-$b.nostats.txt"
      ovs-ofctl -O OpenFlow13 show "$b" > "ofctl-show-$b.txt"
    done
    "${VSCTL[@]}" list-br > bridges.txt
    "${VSCTL[@]}" list Interface > ovsdb-Interface-full.txt
  )
  api GET /trunks | jq . > "$D/api-trunks.json"
  cp "$STATE" "$D/scenario.env"
  log "captured into $D"
}

# unplug: os-vif's unplug of a vlan-aware VM (its tap, then the trunk bridge); the
# reference's handler then removes the patch ports (handle_trunk_remove)
unplug() {
  . "$STATE"
  "${VSCTL[@]}" --if-exists del-port "$BRIDGE" "$TAP"
  "${HVX[@]}" ip link del "$TAP" 2>/dev/null || true
  "${VSCTL[@]}" --if-exists del-br "$BRIDGE"
  local i
  for i in $(seq 1 100); do
    "${VSCTL[@]}" list-ports br-int | grep -q "^\(tpi\|spi\)-" || break
    sleep 0.3
  done
  log "unplugged: bridge $BRIDGE gone; br-int ports: $("${VSCTL[@]}" list-ports br-int | tr '\n' ' ')"
  sleep 3; settle
}

down() {
  [ -s "$STATE" ] || return 0
  . "$STATE"
  if [ -n "${BRIDGE:-}" ]; then
    "${VSCTL[@]}" --if-exists del-port "$BRIDGE" "$TAP" || true
    "${HVX[@]}" ip link del "$TAP" 2>/dev/null || true
    "${VSCTL[@]}" --if-exists del-br "$BRIDGE" || true
  fi
  # a trunk whose parent is bound is in use (409 TrunkInUse): unbind the parent first, as
  # nova's port detach does
  [ -z "${PARENT:-}" ] || api PUT "/ports/$PARENT" '{"port":{"binding:host_id":"","device_id":"","device_owner":""}}' >/dev/null 2>&1 || true
  [ -z "${TRUNK:-}" ] || api DELETE "/trunks/$TRUNK" >/dev/null || log "trunk $TRUNK not deleted"
  local k
  for k in ${SUB1:-} ${SUB2:-} ${PARENT:-}; do api DELETE "/ports/$k" >/dev/null 2>&1 || true; done
  for k in ${NET_P:-} ${NET_S1:-} ${NET_S2:-}; do api DELETE "/networks/$k" >/dev/null 2>&1 || true; done
  rm -f "$STATE"
  log "scenario removed"
}

case "${1:-}" in
  up) up ;;
  capture) capture "${2:?capture DIR}" ;;
  unplug) unplug ;;
  down) down ;;
  all) D=${2:?all DIR}; up; capture "$D/wired"; unplug; capture "$D/unplugged"; down ;;
  *) echo "usage: RELEASE=2026.2 $0 up | capture DIR | unplug | down | all DIR" >&2; exit 2 ;;
esac
