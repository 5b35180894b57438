package feature

import "sort"

// BridgeLayout is what the agent's bridge setup built: the names and
// patch-port ofports the flows need.
type BridgeLayout struct {
	Integration string // br-int
	Tunnel      string // br-tun, empty when tunnelling is off
	// PatchTun is patch-tun's ofport on br-int; PatchInt is patch-int's on br-tun.
	PatchTun, PatchInt uint32
	// Physical maps a physical network to its bridge and patch ports.
	Physical map[string]PhysBridge
}

// PhysBridge is one bridge_mappings entry after setup.
type PhysBridge struct {
	Bridge string
	// IntOFPort is int-<bridge> on br-int; PhyOFPort is phy-<bridge> on the bridge.
	IntOFPort, PhyOFPort uint32
}

// Bridges returns every bridge of the layout, br-int first, then br-tun,
// then the physical bridges by physical network name.
func (l BridgeLayout) Bridges() []string {
	out := []string{l.Integration}
	if l.Tunnel != "" {
		out = append(out, l.Tunnel)
	}
	keys := make([]string, 0, len(l.Physical))
	for k := range l.Physical {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		out = append(out, l.Physical[k].Bridge)
	}
	return out
}
