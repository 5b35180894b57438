package firewall

import (
	of "github.com/ovsagent/ovsagent/internal/openflow"
)

// Tables of br-int the firewall owns (neutron-lib ovs_constants).
const (
	TableTransient              = 60 // pipeline's; the entry into the firewall
	TableBaseEgress             = 71
	TableRulesEgress            = 72
	TableAcceptOrIngress        = 73
	TableBaseIngress            = 81
	TableRulesIngress           = 82
	TableAcceptedEgressTraffic  = 91
	TableAcceptedIngressTraffic = 92
	TableDroppedTraffic         = 93
	TableAcceptedEgressNormal   = 94
)

// Tables lists the firewall tables (the reference's OVS_FIREWALL_TABLES plus
// 91-94), e.g. for a stale-flow sweep or conjunction id recovery.
var Tables = []uint8{71, 72, 73, 81, 82, 91, 92, 93, 94}

// Registers (neutron openvswitch_firewall constants).
const (
	RegPort        = 5 // the port's ofport
	RegNet         = 6 // the local VLAN = conntrack zone
	RegRemoteGroup = 7 // the matched conjunction id
)

// ct_mark values.
const (
	ctMarkNormal  = 0
	ctMarkInvalid = 1
)

// Conntrack state matches, named as the reference names them.
var (
	ctTracked         = of.CtState(of.CtTracked, of.CtTracked)                                                      // +trk
	ctNotTracked      = of.CtState(0, of.CtTracked)                                                                 // -trk
	ctNewNotEst       = of.CtState(of.CtNew, of.CtNew|of.CtEstablished)                                             // +new-est
	ctEstNotReply     = of.CtState(of.CtEstablished, of.CtEstablished|of.CtRelated|of.CtReply)                      // +est-rel-rpl
	ctEstReply        = of.CtState(of.CtEstablished|of.CtReply, of.CtEstablished|of.CtRelated|of.CtReply)           // +est-rel+rpl
	ctRelated         = of.CtState(of.CtRelated, of.CtNew|of.CtEstablished|of.CtRelated|of.CtInvalid)               // -new-est+rel-inv
	ctInvalid         = of.CtState(of.CtTracked|of.CtInvalid, of.CtTracked|of.CtInvalid)                            // +trk+inv
	ctNotEstablished  = of.CtState(0, of.CtEstablished)                                                             // -est
	ctEstablished     = of.CtState(of.CtEstablished, of.CtEstablished)                                              // +est
	ctAcceptVariants  = [2]of.MatchField{ctEstNotReply, ctNewNotEst}                                                // rule flows: est, new
	zoneFromReg       = of.RegRef(RegNet, 0, 16)                                                                    // NXM_NX_REG6[0..15]
	ctMarkInvalidExec = []of.Action{of.SetField{Field: of.MatchField{Field: of.FieldCtMark, Value: ctMarkInvalid}}} // set_field:0x1->ct_mark
)

// The actions every port's flows repeat are built once and shared (action
// values are never modified once built): installed flows are kept for as
// long as they are installed, 56k at 1,000 ports, and a boxed value per
// flow and action would be a large share of the agent's heap.
var (
	resubmits   [256]of.Action // resubmit(,t)
	ctRecircs   [256]of.Action // ct(table=t,zone=NXM_NX_REG6[0..15])
	ctCommitted = of.Action(of.CT{Commit: true, ZoneSrc: &zoneFromReg})
	// ct(commit,zone=NXM_NX_REG6[0..15],exec(set_field:0x1->ct_mark))
	ctCommitInvalid = of.Action(of.CT{Commit: true, ZoneSrc: &zoneFromReg, Exec: ctMarkInvalidExec})
)

func init() {
	for t := range resubmits {
		resubmits[t] = of.ResubmitTable(uint8(t))
		table := uint8(t)
		ctRecircs[t] = of.CT{Table: &table, ZoneSrc: &zoneFromReg}
	}
}

func resubmit(t uint8) of.Action     { return resubmits[t] }
func ctRecirc(table uint8) of.Action { return ctRecircs[table] }

func regPort(ofport uint32) of.MatchField { return of.Reg(RegPort, ofport) }
func regNet(vlan uint16) of.MatchField    { return of.Reg(RegNet, uint32(vlan)) }

func ethTypeOf(e EtherType) uint16 {
	if e == IPv6 {
		return of.EthTypeIPv6
	}
	return of.EthTypeIPv4
}

func flow(table uint8, prio uint16, m of.Match, actions ...of.Action) of.Flow {
	return of.Flow{Table: table, Priority: prio, Match: m, Actions: actions}
}

// BaseFlows are the table defaults: what the reference installs when the
// driver starts (with reset_counts, as os-ken sends them), plus the
// "+trk+inv -> drop" flows of 72 and 82 that the reference repeats for every
// port with an identical match (one shared flow here, owned by the base).
func BaseFlows(cfg Config) []of.Flow {
	var fs []of.Flow
	add := func(f of.Flow) {
		f.Flags = of.FlagResetCounts
		fs = append(fs, f)
	}
	for _, t := range []uint8{TableBaseEgress, TableRulesEgress, TableAcceptOrIngress, TableBaseIngress, TableRulesIngress} {
		add(flow(t, 0, nil))
	}
	add(flow(TableBaseEgress, 110, of.Match{ctTracked}, of.CtClear{}, resubmit(TableBaseEgress)))
	add(flow(TableAcceptedEgressNormal, 1, nil, of.Output{Port: of.PortNormal}))
	add(flow(TableAcceptedEgressTraffic, 1, nil, resubmit(TableAcceptedEgressNormal)))
	add(flow(TableAcceptedIngressTraffic, 0, nil))
	add(flow(TableDroppedTraffic, 0, nil))
	for _, t := range []uint8{TableRulesEgress, TableRulesIngress} {
		fs = append(fs, flow(t, 50, of.Match{ctInvalid}, resubmit(TableDroppedTraffic)))
	}
	if cfg.ExplicitlyEgressDirect {
		// As the reference's _initialize_common_flows (2024.2+): above the
		// pipeline's table-60 NORMAL (priority 1, was 3 in Zed) and below
		// every port flow, so ingress that no port flow claims (e.g. to a
		// port without port security) is delivered by 94's direct flows, not
		// NORMAL: egress leaves by direct output, so NORMAL never learns the
		// VM's MAC and would flood.
		add(flow(TableTransient, 2, nil, resubmit(TableAcceptedEgressNormal)))
	}
	return fs
}
