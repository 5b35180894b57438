# shellcheck shell=bash
# refenv/lib/capture.sh: what the reference-agent capture scripts (refenv/qos_capture.sh,
# refenv/trunk_capture.sh, refenv/dvr.sh) share, sourced by them after `set -euo pipefail` and
# HERE (refenv/):
#
#   CAPTURE_NAME=qos_capture     # log prefix, and <name>.sh in messages
#   SCENARIO=qos-scenario        # the scenario's state file /run/refenv/<release>/<name>.env
#   . "$HERE/lib/capture.sh"
#
# It refuses the chroot-less release (zed), reads the release's environment (release.sh env)
# and defines: log, api (lib/api.sh), save, net, subnet (the release's API, noauth, project $PROJ or demo),
# vif_plug (os-vif's plug of a VM's tap), capture_settle (wait for the caller's snapshot to
# stop changing) and capture_base (capture.sh's dump, less what differs per run).
RELEASE=${RELEASE:-2026.2}
[ "$RELEASE" != zed ] || { echo "$CAPTURE_NAME.sh: a chroot release (its reference agent on a private OVS)" >&2; exit 2; }
eval "$(RELEASE=$RELEASE "$HERE/release.sh" env)"
API=http://127.0.0.1:$REFENV_API_PORT/v2.0
PROJ=${PROJ:-demo}
STATE=/run/refenv/$RELEASE/$SCENARIO.env
VSCTL=(ovs-vsctl --timeout=10 --db="unix:$REFENV_OVS_DIR/db.sock")
HVX=(ip netns exec "$REFENV_OVS_NS")

LOG_NAME=$CAPTURE_NAME
# shellcheck source=lib/api.sh
. "$HERE/lib/api.sh"
save() { echo "$1=$2" >> "$STATE"; }
net() { # name extra-json
  api POST /networks "{\"network\":{\"name\":\"$1\",\"project_id\":\"$PROJ\",\"admin_state_up\":true$2}}" | jq -r .network.id
}
subnet() { # net cidr
  api POST /subnets "{\"subnet\":{\"project_id\":\"$PROJ\",\"network_id\":\"$1\",\"ip_version\":4,\"cidr\":\"$2\",\"gateway_ip\":null,\"enable_dhcp\":false}}" >/dev/null
}

# vif_plug bridge tap port-id mac vm-uuid: as os-vif plugs a VM: a veth tap (its peer
# v<port-id[:11]> with the VM's MAC stays in the OVS netns: no traffic is needed) on the
# bridge with iface-id, attached-mac, iface-status, vm-uuid.
vif_plug() {
  local br=$1 tap=$2 pid=$3 mac=$4 dev=$5
  "${HVX[@]}" ip link del "$tap" 2>/dev/null || true
  "${HVX[@]}" ip link add "$tap" type veth peer name "v${pid:0:11}"
  "${HVX[@]}" ip link set "v${pid:0:11}" address "$mac"
  "${HVX[@]}" ip link set "v${pid:0:11}" up
  "${HVX[@]}" ip link set "$tap" up
  "${VSCTL[@]}" -- --may-exist add-port "$br" "$tap" -- set Interface "$tap" \
     external_ids:iface-id="$pid" external_ids:attached-mac="$mac" \
     external_ids:iface-status=active external_ids:vm-uuid="$dev"
}

# capture_settle polls: the agent applies in steps; wait until two of the caller's snapshot
# outputs a poll (3 s) apart are equal, at most polls*3 s.
capture_settle() {
  local polls=$1 a="" b i
  for i in $(seq 1 "$polls"); do
    b=$(snapshot) || { log "snapshot failed"; return 1; }
    [ -n "$a" ] && [ "$a" = "$b" ] && { log "settled"; return 0; }
    a=$b; sleep 3
  done
  log "not settled after $((polls * 3)) s"; return 1
}

# capture_base dir: capture.sh's dump of the host and the API into dir, without the files
# that differ per run and say nothing of the scenario (memory, broker topology, datapath).
capture_base() {
  local D=$1
  mkdir -p "$D"
  OUT=$D RELEASE=$RELEASE "$HERE/capture.sh" >/dev/null
  [ -s "$D/ovs/flows-br-int.nostats.txt" ] && [ -s "$D/api-ports.json" ] || { log "capture.sh wrote nothing to $D"; return 1; }
  rm -f "$D/process_memory.txt" "$D/rabbit_topology_full.txt" "$D/ovs/dpctl-dump-conntrack.txt" "$D/ovs/dpctl-dump-flows.txt"
}
