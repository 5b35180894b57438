package agent

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/ovsagent/ovsagent/internal/openflow"
)

// HostState is what the check for state ovs-agent cannot rebuild reads
// from a host before a start or a takeover.
type HostState struct {
	Layout BridgeLayout
	// Flows are every flow installed on each bridge of the layout.
	Flows map[string][]openflow.Flow
	// Bridges are the names of all bridges on the host.
	Bridges []string
	// QoSRows and QueueRows count the OVSDB QoS and Queue rows.
	QoSRows, QueueRows int
}

// Tables of the reference's features ovs-agent does not have (neutron-lib
// ovs_constants): DVR on br-int, br-tun and the physical bridges, QoS's
// packet-rate (58; 59 in Zed) and bandwidth (59, 2023.2+) limits, the log
// extension's packet-ins from the accept and drop tables.
var (
	dvrIntTables  = []uint8{1, 2, 3, 4}
	dvrTunTables  = []uint8{1, 9}
	dvrPhysTables = []uint8{1, 2, 3}
)

// UnrebuiltState lists, one reason per feature, the state on the host that
// the reference's features left and that ovs-agent would sweep at its
// start without rebuilding it (so the traffic it carries would break): DVR
// flows, QoS rows, queues and rate-limit flows, trunk bridges, log flows.
// Empty means a start or takeover loses nothing.
func UnrebuiltState(h HostState) []string {
	var out []string
	count := func(br string, tables []uint8) int {
		n := 0
		for _, f := range h.Flows[br] {
			if slices.Contains(tables, f.Table) {
				n++
			}
		}
		return n
	}
	var dvr []string
	if n := count(h.Layout.Integration, dvrIntTables); n > 0 {
		dvr = append(dvr, fmt.Sprintf("%d on %s tables 1-4", n, h.Layout.Integration))
	}
	if h.Layout.Tunnel != "" {
		if n := count(h.Layout.Tunnel, dvrTunTables); n > 0 {
			dvr = append(dvr, fmt.Sprintf("%d on %s tables 1 and 9", n, h.Layout.Tunnel))
		}
	}
	for _, pn := range sortedKeys(h.Layout.Physical) {
		br := h.Layout.Physical[pn].Bridge
		if n := count(br, dvrPhysTables); n > 0 {
			dvr = append(dvr, fmt.Sprintf("%d on %s tables 1-3", n, br))
		}
	}
	if len(dvr) > 0 {
		out = append(out, "DVR flows ("+strings.Join(dvr, ", ")+"): DVR is not supported by ovs-agent yet")
	}
	qos, logs := 0, 0
	for _, f := range h.Flows[h.Layout.Integration] {
		switch {
		// ovs-agent's own flows in 58 and 59 are the tables' priority-0
		// gotos (2026.2's chain 58 -> 59 -> 60), in 91-93 the defaults
		// (priority 0 or 1); QoS meters and the log extension's packet-ins
		// sit above them.
		case (f.Table == 58 || f.Table == 59) && f.Priority > 0:
			qos++
		case f.Table >= 91 && f.Table <= 93 && (hasController(f) || f.Priority > 1):
			logs++
		}
	}
	if qos > 0 || h.QoSRows > 0 || h.QueueRows > 0 {
		out = append(out, fmt.Sprintf("QoS state (%d rate-limit flows on %s tables 58-59, %d QoS and %d Queue rows in OVSDB): QoS is not supported by ovs-agent yet",
			qos, h.Layout.Integration, h.QoSRows, h.QueueRows))
	}
	var trunks []string
	for _, b := range h.Bridges {
		if strings.HasPrefix(b, "tbr-") {
			trunks = append(trunks, b)
		}
	}
	if len(trunks) > 0 {
		sort.Strings(trunks)
		out = append(out, fmt.Sprintf("trunk bridges (%s): trunk ports are not supported by ovs-agent yet", strings.Join(trunks, ", ")))
	}
	if logs > 0 {
		out = append(out, fmt.Sprintf("security group log flows (%d packet-in flows on %s tables 91-93): the log extension is not supported by ovs-agent yet", logs, h.Layout.Integration))
	}
	return out
}

func hasController(f openflow.Flow) bool {
	for _, a := range f.Actions {
		switch a := a.(type) {
		case openflow.Controller:
			return true
		case openflow.Output:
			if a.Port == openflow.PortController {
				return true
			}
		}
	}
	return false
}
