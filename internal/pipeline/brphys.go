package pipeline

import (
	of "github.com/ovsagent/ovsagent/internal/openflow"
)

// physBaseFlows: a physical bridge is a plain NORMAL switch...
func physBaseFlows(pb *PhysBridge) []of.Flow {
	return []of.Flow{flow(PhysLocalSwitching, 0, nil, normal())}
}

// physPatchFlows: ...except that frames from br-int pass only when a local
// VLAN translation claims them. With DVR the same match in table 0 is
// DVR's goto DVR_PROCESS_PHYSICAL and the drop sits in table 2, both
// internal/dvr's (setup_dvr_flows_on_phys_br).
func physPatchFlows(pb *PhysBridge, distributed bool) []of.Flow {
	if distributed {
		return nil
	}
	return []of.Flow{drop(PhysLocalSwitching, 2, of.InPort(pb.PhysOfport))}
}

// physTranslationFlow maps the local VLAN leaving br-int to the provider
// VLAN, or strips it for a flat network. With DVR it lives in
// LOCAL_VLAN_TRANSLATION (br_phys.provision_local_vlan distributed), behind
// DVR_PROCESS_PHYSICAL.
func physTranslationFlow(pb *PhysBridge, n *Network, distributed bool) of.Flow {
	t := PhysLocalSwitching
	if distributed {
		t = PhysLocalVLANTranslation
	}
	m := of.Match{of.InPort(pb.PhysOfport), of.DlVlan(n.LocalVLAN)}
	if n.Type == TypeFlat || !n.Key.HasSeg {
		return flow(t, 4, m, of.PopVLAN{}, normal())
	}
	return flow(t, 4, m, setVLAN(uint16(n.Key.SegID)), normal())
}
