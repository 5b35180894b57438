# shellcheck shell=bash
# refenv/lib/dvr.sh: what the DVR scripts (refenv/dvr.sh, refenv/dvr_e2e.sh, refenv/dvr_tenant.sh)
# share about refenv/dvr.sh's environment, sourced by them after RELEASE and HERE (refenv/) are set
# and the release's DVR variant environment is read (VARIANT=dvr release.sh env: REFENV_API_PORT,
# REFENV_DB; dvr.sh through lib/capture.sh, which it sources first):
#
#   . "$HERE/lib/dvr.sh"
#
# Names: STATE (dvr.sh's scenario state), VMPFX (the VMs' netns prefix), EXTNS (the outside's
# netns), UNDNS (the underlay's netns), EXT_GW (the outside's address on the external network).
# Functions:
#   hv N                 hypervisor N's names (release.sh HV=N): HVNS (its netns), HOSTN (its agent
#                        host), OVSD (its OVS run directory), VSCTL and HVX (command arrays: ovs-vsctl
#                        on its OVS, ip netns exec in its netns; lib/capture.sh's vif_plug uses them)
#   vsctl ARGS, ofctl ARGS   ovs-vsctl / ovs-ofctl -O OpenFlow13 on the OVS of the last `hv`
#   host_of N            hypervisor N's agent host name, printed (no name set)
#   dvrmac HOST          the DVR MAC the server gave HOST (no API: the table dvr_host_macs)
#   apiw METHOD PATH JSON, apid PATH   the API's writes and deletes (project demo; apid ignores
#                        failures and prints nothing); the scripts' own `api` reads differ: dvr.sh's
#                        is lib/api.sh's (METHOD PATH [JSON]), dvr_e2e.sh's GET sends X-Roles: admin
#   pingn VM DST COUNT INTERVAL   ping from VM's netns: prints "sent received"
#   sniff N IFACE SECONDS OUT [MODE]   dvr_sniff.py on IFACE for SECONDS into OUT, in the
#                        background (SNIFFS); N: a hypervisor's number (its netns), ext (the
#                        outside's netns) or und (the underlay's); MODE: dvr_sniff.py's (plain, vlan,
#                        tunnel; none: VXLAN)
#   wsniff               waits for the sniffers started since the last wsniff
#   pass WORDS, fail WORDS   log a PASS: / FAIL: line (the caller's log); fail counts in FAILS
STATE=/run/refenv/$RELEASE-dvr/dvr.env
VMPFX=$RELEASE-dvr-
EXTNS=${VMPFX}ext
UNDNS=${VMPFX}und
EXT_GW=203.0.113.1

hv() { # N: hypervisor N's names (release.sh HV=N)
  local e; e=$(VARIANT=dvr HV=$1 "$HERE/release.sh" env)
  HVNS=$(sed -n 's/^REFENV_OVS_NS=//p' <<<"$e"); HOSTN=$(sed -n 's/^REFENV_AGENT_HOST=//p' <<<"$e")
  OVSD=$(sed -n 's/^REFENV_OVS_DIR=//p' <<<"$e")
  VSCTL=(ovs-vsctl --timeout=10 --db="unix:$OVSD/db.sock"); HVX=(ip netns exec "$HVNS")
}
vsctl() { ovs-vsctl --timeout=10 --db="unix:$OVSD/db.sock" "$@"; }
ofctl() { OVS_RUNDIR=$OVSD ovs-ofctl -O OpenFlow13 "$@"; }
host_of() { VARIANT=dvr HV=$1 "$HERE/release.sh" env | sed -n 's/^REFENV_AGENT_HOST=//p'; }
dvrmac() { mysql -N -e "SELECT LOWER(REPLACE(mac_address,'-',':')) FROM $REFENV_DB.dvr_host_macs WHERE host='$1'"; }

apiw() { curl -sS -f -X "$1" -H 'Content-Type: application/json' -H 'X-Project-Id: demo' -d "$3" "http://127.0.0.1:$REFENV_API_PORT/v2.0$2"; }
apid() { curl -sS -f -X DELETE -H 'X-Project-Id: demo' "http://127.0.0.1:$REFENV_API_PORT/v2.0$1" >/dev/null 2>&1 || true; }

pingn() { # vm dst count interval: prints "sent received"
  { ip netns exec "$VMPFX$1" ping -n -q -c "$3" -i "$4" -W 1 "$2" 2>/dev/null || true; } | sed -nE 's/^([0-9]+) packets transmitted, ([0-9]+) (packets )?received.*/\1 \2/p'
}
sniff() { # N IFACE SECONDS OUT [MODE]: frames on IFACE inside hvN's netns (N=ext: the outside netns, N=und: the underlay's)
  local ns
  case "$1" in ext) ns=$EXTNS ;; und) ns=$UNDNS ;; *) hv "$1"; ns=$HVNS ;; esac
  # shellcheck disable=SC2086 # MODE: one word or none
  ip netns exec "$ns" python3 "$HERE/dvr_sniff.py" "$2" "$3" ${5:-} > "$4" 2>&1 &
  SNIFFS="${SNIFFS:-} $!"
}
wsniff() { local p; for p in ${SNIFFS:-}; do wait "$p" || true; done; SNIFFS=""; }

FAILS=0
pass() { log "PASS: $*"; }
fail() { log "FAIL: $*"; FAILS=$((FAILS + 1)); }
