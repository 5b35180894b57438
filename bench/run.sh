#!/bin/bash
# bench/run.sh: ovsagent vs the reference neutron-openvswitch-agent, one at a time, on a private
# Open vSwitch in netns "benchhv" (host "hvbench"), against the real neutron-server of
# refenv/ (started with AGENT=none if it is not running). See bench/README.md.
#
#   bench/run.sh [--agent ours|reference|both] [--ports 20,100,1000] [--samples 20] [--idle 60]
#                [--max-wait 900] [--no-floor] [--floor-max N] [--no-restart] [--keep]
#                [--ours-bin PATH]   (default: go build ./cmd/ovs-agent right before its phase)
#                [--heap-profile] [--debug-log]   (diagnosis: heap profile, debug log)
#   bench/run.sh --cleanup-only      remove everything a previous (interrupted) run left behind
#
# Prints a markdown table; raw output goes to bench/results/<UTC date-time>/.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
export PATH=/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin:/usr/local/go/bin
[ "$(id -u)" = 0 ] || { echo "bench: run as root (netns, OVS)" >&2; exit 2; }
exec /usr/bin/python3 "$HERE/bench.py" "$@"
