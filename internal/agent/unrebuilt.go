package agent

import (
	"fmt"
	"sort"
	"strings"

	"github.com/ovsagent/ovsagent/internal/dvr"
	"github.com/ovsagent/ovsagent/internal/feature"
	"github.com/ovsagent/ovsagent/internal/openflow"
)

// HostState is what the check for state ovs-agent cannot rebuild reads
// from a host before a start or a takeover.
type HostState = feature.HostState

// UnrebuiltState lists, one reason per feature, the state on the host that
// ovs-agent would sweep at its start without rebuilding it (so the traffic
// it carries would break). The reference's features ovs-agent lacks, or
// runs only when configured, are checked here (DVR flows without
// enable_distributed_routing: internal/dvr UnrebuiltWithoutDVR; log flows; QoS
// rows, queues and rate-limit flows without the qos extension; trunk
// bridges without the trunk handler: absentFeatures), each unless a
// feature of its name is registered; then each registered feature that has state of its own
// on the host says what it would not rebuild (feature.Takeover). Empty
// means a start or takeover loses nothing.
func UnrebuiltState(h HostState, features ...feature.Feature) []string {
	registered := map[string]bool{}
	for _, f := range features {
		registered[f.Name()] = true
	}
	var out []string
	for _, c := range absentFeatures {
		if !registered[c.name] {
			out = append(out, c.check(h)...)
		}
	}
	for _, f := range features {
		if t, ok := f.(feature.Takeover); ok {
			out = append(out, t.Unrebuilt(h)...)
		}
	}
	return out
}

// absentFeatures are the checks of the reference's features ovs-agent has
// no feature for, by the name the feature will register under.
var absentFeatures = []struct {
	name  string
	check func(HostState) []string
}{
	{dvr.FeatureName, dvr.UnrebuiltWithoutDVR},
	{"qos", unrebuiltQoS},
	{"trunk", unrebuiltTrunk},
	{"log", unrebuiltLog},
}

func unrebuiltQoS(h HostState) []string {
	qos := 0
	for _, f := range h.Flows[h.Layout.Integration] {
		// ovs-agent's own flows in 58 and 59 are the tables' priority-0
		// gotos (2026.2's chain 58 -> 59 -> 60); QoS meters sit above them.
		if (f.Table == 58 || f.Table == 59) && f.Priority > 0 {
			qos++
		}
	}
	if qos == 0 && h.QoSRows == 0 && h.QueueRows == 0 {
		return nil
	}
	// Adopted by the qos feature when it is registered; refused only without it.
	return []string{fmt.Sprintf("QoS state (%d rate-limit flows on %s tables 58-59, %d QoS and %d Queue rows in OVSDB): the qos extension is not enabled ([agent] extensions = qos)",
		qos, h.Layout.Integration, h.QoSRows, h.QueueRows)}
}

func unrebuiltTrunk(h HostState) []string {
	var trunks []string
	for _, b := range h.Bridges {
		if strings.HasPrefix(b, "tbr-") {
			trunks = append(trunks, b)
		}
	}
	if len(trunks) == 0 {
		return nil
	}
	sort.Strings(trunks)
	// Rewired by the trunk handler when it is registered; refused only without it.
	return []string{fmt.Sprintf("trunk bridges (%s): the trunk handler is off ([ovs] trunk_enabled = False)", strings.Join(trunks, ", "))}
}

func unrebuiltLog(h HostState) []string {
	logs := 0
	for _, f := range h.Flows[h.Layout.Integration] {
		// ovs-agent's own flows there are the tables' defaults (priority
		// 0 or 1); the log extension adds packet-ins above them.
		if f.Table >= 91 && f.Table <= 93 && (hasController(f) || f.Priority > 1) {
			logs++
		}
	}
	if logs == 0 {
		return nil
	}
	return []string{fmt.Sprintf("security group log flows (%d packet-in flows on %s tables 91-93): the log extension is not supported by ovs-agent yet", logs, h.Layout.Integration)}
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
