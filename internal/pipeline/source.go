package pipeline

import (
	"fmt"
	"strings"

	"github.com/ovsagent/ovsagent/internal/feature"
	"github.com/ovsagent/ovsagent/internal/openflow"
)

// Source is the pipeline as a flow source of the agent (internal/feature):
// the base, physnet:, net:, port: and tun: owners of every bridge, computed
// by FlowsFor from State. The agent's loop owns State (its port lifecycle
// decides the ports, networks and local VLANs) and registers Source first.
type Source struct{ State *State }

var (
	_ feature.FlowSource = Source{}
	_ feature.Dependents = Source{}
	_ feature.Explainer  = Source{}
	_ feature.PortFlows  = Source{}
)

// SourceName is the pipeline's name among the features.
const SourceName = "pipeline"

func (Source) Name() string { return SourceName }

func (Source) Kinds() []string { return []string{OwnerBase, "physnet", "net", "port", "tun"} }

func (s Source) Owners() []string { return Owners(s.State) }

func (s Source) Flows(owners []string) (map[string]map[string][]openflow.Flow, map[string]error) {
	out := make(map[string]map[string][]openflow.Flow, len(owners))
	errs := map[string]error{}
	for _, o := range owners {
		bf, err := FlowsFor(s.State, o)
		if err != nil {
			errs[o] = err
			continue
		}
		out[o] = bf
	}
	return out, errs
}

func (s Source) Dependents(owner string) []string { return Dependents(s.State, owner) }

// PortOwner implements feature.PortFlows: the port's br-int wiring.
func (Source) PortOwner(portID string) string { return OwnerPort(portID) }

// OwnerPort implements feature.PortFlows.
func (Source) OwnerPort(owner string) (string, bool) { return strings.CutPrefix(owner, "port:") }

// PortOwners: the port's own flows and, once it is on a network, the
// network's (shared with the network's other ports).
func (s Source) PortOwners(p feature.Port) []string {
	out := []string{OwnerPort(p.ID)}
	if pp := s.State.Ports[p.ID]; pp != nil && p.Wiring == feature.WiredUp {
		out = append(out, OwnerNetwork(pp.Net))
	}
	return out
}

func (s Source) Reason(owner, bridge string, table uint8) string {
	kind, arg, _ := strings.Cut(owner, ":")
	what := owner
	switch kind {
	case "port":
		what = "port wiring"
	case "net":
		what = "local VLAN of network " + arg
	}
	return what + ": " + BridgeTableName(s.State, bridge, table)
}

// BridgeTableName is the reference's name of a table of bridge ("table N"
// when it has none).
func BridgeTableName(s *State, bridge string, table uint8) string {
	var tables []Table
	switch {
	case bridge == s.Int.Name:
		tables = IntTables
	case s.Tun != nil && bridge == s.Tun.Name:
		tables = TunTables
	default:
		tables = PhysTables
	}
	if tn := TableName(tables, table); tn != "" {
		return tn
	}
	return fmt.Sprintf("table %d", table)
}
