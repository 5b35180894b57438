package pipeline

import (
	of "github.com/ovsagent/ovsagent/internal/openflow"
)

// physBaseFlows: a physical bridge is a plain NORMAL switch...
func physBaseFlows(pb *PhysBridge) []of.Flow {
	return []of.Flow{flow(PhysLocalSwitching, 0, nil, normal())}
}

// physPatchFlows: ...except that frames from br-int pass only when a local
// VLAN translation claims them.
func physPatchFlows(pb *PhysBridge) []of.Flow {
	return []of.Flow{drop(PhysLocalSwitching, 2, of.InPort(pb.PhysOfport))}
}

// physTranslationFlow maps the local VLAN leaving br-int to the provider
// VLAN, or strips it for a flat network.
func physTranslationFlow(pb *PhysBridge, n *Network) of.Flow {
	m := of.Match{of.InPort(pb.PhysOfport), of.DlVlan(n.LocalVLAN)}
	if n.Type == TypeFlat || !n.Key.HasSeg {
		return flow(PhysLocalSwitching, 4, m, of.PopVLAN{}, normal())
	}
	return flow(PhysLocalSwitching, 4, m, setVLAN(uint16(n.Key.SegID)), normal())
}
