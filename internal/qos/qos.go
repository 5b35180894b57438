// Package qos decides what the reference's QoS extension (neutron 2026.2,
// `[agent] extensions = qos`, the openvswitch QoS driver) puts on a host for a port
// and its policy: OpenFlow meters and the flows that use them, the DSCP marking flows,
// the Interface ingress policing and the QoS/Queue rows. Pure functions: no I/O; the
// adapters that write what is decided live with the agent.
//
// What the reference does, rule by rule (qos_driver.py, br_int.py, ovs_lib.py):
//
//   - bandwidth_limit egress: with [ovs] qos_meter_bandwidth, a kbps meter and a flow in
//     BANDWIDTH_RATE_LIMIT (59) matching in_port and dl_src; else the Interface's
//     ingress_policing_rate/burst (burst 80 % of the rate when unset).
//   - bandwidth_limit ingress: with qos_meter_bandwidth, a kbps meter and a flow in 59
//     matching the local VLAN and dl_dst; else a linux-htb QoS row with queue 0 on the
//     port (max-rate and burst in bit/s).
//   - packet_rate_limit: always meters (pktps, rate and burst ×1000), flows in
//     PACKET_RATE_LIMIT (58) that continue to 59.
//   - dscp_marking: two table-0 flows (IPv4, IPv6) that set reg2=1 and ip_dscp and
//     resubmit the packet to table 0 as if it came in again.
//   - minimum_bandwidth egress: a Queue with min-rate and a linux-htb QoS on the
//     physical bridges' NICs, a table-0 pkt_mark flow on br-int and set_queue flows on
//     the physical bridges (only for ports on a physical network).
//   - minimum_packet_rate, minimum_bandwidth ingress: no data-plane effect (placement).
//
// In 2026.2 (neutron-lib 5) PACKET_RATE_LIMIT is table 58 and BANDWIDTH_RATE_LIMIT 59;
// the pipeline goes 0 → 58 → 59 → 60.
package qos

import (
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"

	"github.com/ovsagent/ovsagent/internal/neutron"
	of "github.com/ovsagent/ovsagent/internal/openflow"
	"github.com/ovsagent/ovsagent/internal/ovsdb"
)

// Tables of br-int the QoS flows live in (neutron_lib ovs_constants, 2026.2).
const (
	TableLocalSwitching     = 0
	TablePacketRateLimit    = 58
	TableBandwidthRateLimit = 59
	TableTransient          = 60
)

// ofctlFlags are the flags of the flows the reference installs through ovs-ofctl
// (ovs_lib add_flow: the queue flows) rather than its OpenFlow connection: an
// OpenFlow 1.0 flow_mod, which OVS keeps with reset_counts (its 1.0 semantics) and
// whose set_field of pkt_mark (no OXM in 1.0) is a REG_LOAD. The same flags and
// encoding here make the flows equal to the reference's, so a takeover adopts them
// unchanged (internal/qos refenv_test.go).
const ofctlFlags = of.FlagResetCounts

// Priorities the reference installs at.
const (
	prioMeter = 100
	prioDSCP  = 65535
	prioQueue = 200
)

// OVSMaxRate is ovs_lib's OVS_MAX_RATE (2**35-1 bit/s), the max-rate of the QoS rows and
// of a minimum-bandwidth queue without a maximum.
const OVSMaxRate = 1<<35 - 1

// DefaultBurstRate is qos_consts.DEFAULT_BURST_RATE: an egress burst of 80 % of the
// rate when the rule sets none (ingress policing only).
const DefaultBurstRate = 0.8

// Meter kinds: the prefix of the reference's meter keys in Port other_config.
const (
	KindBPS = "bps"
	KindPPS = "pps"
)

// Port is what the decision needs of a port: its identity, where it is wired, and the
// policies that may apply (from get_devices_details_list_and_failed_devices).
type Port struct {
	ID              string
	Name            string // the OVS port name (tapXXX)
	MAC             net.HardwareAddr
	OFPort          uint32
	LocalVLAN       uint16
	DeviceOwner     string
	PolicyID        string // qos_policy_id
	NetworkPolicyID string // qos_network_policy_id
	PhysicalNetwork string
}

// PolicyIDToApply is the policy the reference's handle_port applies: the port's, else its
// network's; "" for none.
func (p Port) PolicyIDToApply() string {
	if p.PolicyID != "" {
		return p.PolicyID
	}
	return p.NetworkPolicyID
}

// Options are the agent options that change what QoS does.
type Options struct {
	// MeterBandwidth is [ovs] qos_meter_bandwidth: bandwidth limits by meters instead
	// of ingress policing and linux-htb queues.
	MeterBandwidth bool
}

// Applies is QosRule.should_apply_to_port: a port's own policy always applies; a
// network's only to a port without one that is not a network device (router gateway
// ports excepted).
func Applies(r neutron.QosRule, p Port) bool {
	if p.PolicyID != "" && r.QosPolicyID == p.PolicyID {
		return true
	}
	if p.PolicyID != "" {
		return false
	}
	owner := p.DeviceOwner
	gw := strings.HasPrefix(owner, "network:floatingip_agent_gateway") || strings.HasPrefix(owner, "network:router_gateway")
	netDevice := strings.HasPrefix(owner, "network:") || strings.HasPrefix(owner, "neutron:")
	return gw || !netDevice
}

// MeterSpec is one meter the port needs, before an id is given to it.
type MeterSpec struct {
	Key       string // the reference's other_config key: <kind>_<port id>_<direction>
	Kind      string
	Direction string
	Rate      uint32 // kbps or packets/s
	Burst     uint32 // kb or packets; 0 = no burst flag
}

// Config is the meter's configuration with id.
func (m MeterSpec) Config(id uint32) of.MeterConfig {
	flags := uint16(of.MeterKbps)
	if m.Kind == KindPPS {
		flags = of.MeterPktps
	}
	if m.Burst != 0 {
		flags |= of.MeterBurst
	}
	return of.MeterConfig{ID: id, Flags: flags, Rate: m.Rate, Burst: m.Burst}
}

// MeterKey is the reference's MeterRuleManager.get_data_key.
func MeterKey(kind, portID, direction string) string {
	return kind + "_" + portID + "_" + direction
}

// Policing is an Interface's ingress_policing_rate/burst (kbps, kb).
type Policing struct{ Rate, Burst int64 }

// Queue is a Queue row the reference writes; QoS rows are implied by its Type.
type Queue struct {
	// Type is "bandwidth_limit" (ingress limit: queue 0 of a per-port QoS) or
	// "minimum_bandwidth" (queue <ofport> of the agent's QoS on the physical NICs).
	Type        string
	Port        string // external_ids:port (the OVS port name for bandwidth_limit, the Neutron port id for minimum_bandwidth)
	QueueNum    uint32
	OtherConfig map[string]string
}

// ExternalIDs is the Queue row's external_ids as the reference writes them.
func (q Queue) ExternalIDs() map[string]string {
	return map[string]string{"port": q.Port, "type": q.Type, "queue-num": strconv.FormatUint(uint64(q.QueueNum), 10)}
}

// QoSRow is the linux-htb QoS row that holds q (ovs_lib._update_qos). id is its
// external_ids:id: the OVS port name for bandwidth_limit, the agent's minimum-bandwidth
// QoS id for minimum_bandwidth.
type QoSRow struct {
	Type        string
	ExternalIDs map[string]string
	OtherConfig map[string]string
}

// QoSFor returns the QoS row a queue of type typ lives in.
func QoSFor(typ, id string) QoSRow {
	return QoSRow{Type: "linux-htb", ExternalIDs: map[string]string{"id": id, "_type": typ},
		OtherConfig: map[string]string{"max-rate": strconv.Itoa(OVSMaxRate)}}
}

// Plan is everything QoS wants for one port.
type Plan struct {
	Meters []MeterSpec // sorted by Key
	// DSCP is the mark of a dscp_marking rule, -1 for none.
	DSCP int
	// EgressPolicing is the Interface's ingress policing (egress limit without meters);
	// nil: rate and burst 0 (no policing).
	EgressPolicing *Policing
	// IngressQueue is the queue 0 of the port's own linux-htb QoS (ingress limit
	// without meters); nil: no QoS on the port.
	IngressQueue *Queue
	// MinBandwidthQueue is the port's queue on the physical NICs; nil: none.
	MinBandwidthQueue *Queue
	// Placement-only rules (minimum_packet_rate, minimum_bandwidth ingress): nothing
	// on the host, kept to be reported.
	PlacementOnly []string
}

// Decide returns what the reference's driver sets up for p under policy pol (nil: no
// policy, everything removed).
func Decide(p Port, pol *neutron.QosPolicy, o Options) (Plan, error) {
	plan := Plan{DSCP: -1}
	if pol == nil {
		return plan, nil
	}
	for _, r := range pol.Rules {
		if !Applies(r, p) {
			continue
		}
		switch r.Type {
		case neutron.RuleBandwidthLimit:
			rate, burst := neutron.Int(r.MaxKbps), neutron.Int(r.MaxBurstKbps)
			switch {
			case o.MeterBandwidth:
				m, err := meter(KindBPS, p.ID, r.Direction, rate, burst)
				if err != nil {
					return Plan{}, err
				}
				plan.Meters = append(plan.Meters, m)
			case r.Direction == neutron.DirectionIngress:
				plan.IngressQueue = &Queue{Type: neutron.RuleBandwidthLimit, Port: p.Name, QueueNum: 0,
					OtherConfig: map[string]string{}}
				if rate != 0 {
					// ovs_lib._update_queue: both only when max_kbps is set
					plan.IngressQueue.OtherConfig["max-rate"] = strconv.FormatInt(rate*1000, 10)
					plan.IngressQueue.OtherConfig["burst"] = strconv.FormatInt(burst*1000, 10)
				}
			default:
				if burst == 0 {
					// tc_lib.get_ingress_qdisc_burst_value, then int()
					burst = int64(float64(rate) * DefaultBurstRate)
				}
				plan.EgressPolicing = &Policing{Rate: rate, Burst: burst}
			}
		case neutron.RulePacketRateLimit:
			m, err := meter(KindPPS, p.ID, r.Direction, neutron.Int(r.MaxKpps)*1000, neutron.Int(r.MaxBurstKpps)*1000)
			if err != nil {
				return Plan{}, err
			}
			plan.Meters = append(plan.Meters, m)
		case neutron.RuleDSCPMarking:
			plan.DSCP = r.DSCPMark
		case neutron.RuleMinimumBandwidth:
			if r.Direction == neutron.DirectionIngress || p.PhysicalNetwork == "" {
				plan.PlacementOnly = append(plan.PlacementOnly, r.Type+"/"+r.Direction)
				continue
			}
			oc := map[string]string{}
			if k := neutron.Int(r.MinKbps); k != 0 {
				// ovs_lib._update_queue: max-rate only comes with a min-rate
				oc["min-rate"] = strconv.FormatInt(k*1000, 10)
				oc["max-rate"] = strconv.Itoa(OVSMaxRate)
			}
			plan.MinBandwidthQueue = &Queue{Type: neutron.RuleMinimumBandwidth, Port: p.ID, QueueNum: p.OFPort, OtherConfig: oc}
		case neutron.RuleMinimumPacketRate:
			plan.PlacementOnly = append(plan.PlacementOnly, r.Type+"/"+r.Direction)
		}
	}
	sort.Slice(plan.Meters, func(i, j int) bool { return plan.Meters[i].Key < plan.Meters[j].Key })
	return plan, nil
}

func meter(kind, portID, dir string, rate, burst int64) (MeterSpec, error) {
	if rate > 0xffffffff || burst > 0xffffffff {
		return MeterSpec{}, fmt.Errorf("qos: port %s %s %s rate %d burst %d exceed a meter's 32 bits", portID, kind, dir, rate, burst)
	}
	return MeterSpec{Key: MeterKey(kind, portID, dir), Kind: kind, Direction: dir, Rate: uint32(rate), Burst: uint32(burst)}, nil
}

// Flows are p's br-int flows for plan, the meters numbered by ids (MeterSpec.Key → id).
// A meter without an id, or a port without the ofport/VLAN its match needs, has no
// flow (the reference logs "Invalid inputs" and installs none).
func Flows(p Port, plan Plan, ids map[string]uint32) []of.Flow {
	var out []of.Flow
	for _, m := range plan.Meters {
		id, ok := ids[m.Key]
		if !ok || id == 0 {
			continue
		}
		var match of.Match
		switch {
		case m.Direction == neutron.DirectionEgress && p.OFPort != 0:
			match = of.Match{of.InPort(p.OFPort), of.EthSrc(p.MAC)}
		case m.Direction == neutron.DirectionIngress && p.LocalVLAN != 0:
			match = of.Match{of.DlVlan(p.LocalVLAN), of.EthDst(p.MAC)}
		default:
			continue
		}
		table, next := uint8(TableBandwidthRateLimit), uint8(TableTransient)
		if m.Kind == KindPPS {
			table, next = TablePacketRateLimit, TableBandwidthRateLimit
		}
		out = append(out, of.Flow{Table: table, Priority: prioMeter, Match: match,
			Actions: []of.Action{of.Meter{ID: id}, of.GotoTable{Table: next}}})
	}
	if plan.DSCP >= 0 && p.OFPort != 0 {
		in := p.OFPort
		for _, et := range []uint16{of.EthTypeIPv4, of.EthTypeIPv6} {
			out = append(out, of.Flow{Table: TableLocalSwitching, Priority: prioDSCP,
				Match: of.Match{of.InPort(p.OFPort), of.Reg(2, 0), of.EthType(et)},
				Actions: []of.Action{of.SetReg(2, 1),
					of.SetField{Field: of.MatchField{Field: of.FieldIPDSCP, Value: uint64(plan.DSCP)}},
					of.Resubmit{InPort: &in, Table: 255}}})
		}
	}
	if q := plan.MinBandwidthQueue; q != nil && p.OFPort != 0 {
		// ovs_lib._set_pkt_mark_for_minimum_bandwidth: the queue number rides to the
		// physical bridge in pkt_mark
		out = append(out, of.Flow{Table: TableLocalSwitching, Priority: prioQueue, Flags: ofctlFlags,
			Match: of.Match{of.InPort(p.OFPort), of.Reg(4, 0)},
			Actions: []of.Action{of.Load{Dst: of.FieldRef{Field: of.FieldPktMark}, Value: uint64(q.QueueNum), RegLoad: true},
				of.Load{Dst: of.RegRef(4, 0, 1), Value: 1}, of.ResubmitTable(TableLocalSwitching)}})
	}
	return out
}

// BaseFlows are the flows the reference's QoS driver installs on br-int when it
// starts, whatever the policies: set_queue_for_ingress_bandwidth_limit, which sends
// every packet through queue 0 once (reg3 remembers it) so that a port's linux-htb
// QoS limits what it receives.
func BaseFlows() []of.Flow {
	return []of.Flow{{Table: TableLocalSwitching, Priority: prioQueue, Flags: ofctlFlags, Match: of.Match{of.Reg(3, 0)},
		Actions: []of.Action{of.SetQueue{Queue: 0}, of.Load{Dst: of.RegRef(3, 0, 1), Value: 1},
			of.ResubmitTable(TableLocalSwitching)}}}
}

// PhysicalFlows are a physical bridge's flows for the minimum-bandwidth queues:
// set_queue_for_minimum_bandwidth, one per (patch port, queue).
func PhysicalFlows(patchOFPorts []uint32, queueNums []uint32) []of.Flow {
	var out []of.Flow
	for _, pp := range patchOFPorts {
		for _, q := range queueNums {
			out = append(out, of.Flow{Table: 0, Priority: prioQueue, Flags: ofctlFlags,
				Match: of.Match{of.InPort(pp), of.PktMark(q), of.Reg(4, 0)},
				Actions: []of.Action{of.SetQueue{Queue: q}, of.Load{Dst: of.RegRef(4, 0, 1), Value: 1},
					of.ResubmitTable(0)}})
		}
	}
	return out
}

// AssignMeterIDs gives every key of want a meter id: the one held for it (Port
// other_config, where the reference keeps them, so an agent restart or a takeover
// keeps the meters), else the lowest id in [1, max] no key holds. The reference picks
// at random; any free id is as good, and the lowest is reproducible. held covers every
// port of the bridge, so an id is never given twice.
func AssignMeterIDs(want []string, held map[string]uint32, max uint32) (map[string]uint32, error) {
	used := make(map[uint32]bool, len(held))
	for _, id := range held {
		used[id] = true
	}
	out := make(map[string]uint32, len(want))
	var missing []string
	for _, k := range want {
		if id, ok := held[k]; ok && id >= 1 && id <= max {
			out[k] = id
		} else {
			missing = append(missing, k)
		}
	}
	sort.Strings(missing)
	next := uint32(1)
	for _, k := range missing {
		for next <= max && used[next] {
			next++
		}
		if next > max || next == 0 {
			return out, fmt.Errorf("qos: no free meter id for %s (max_meter %d)", k, max)
		}
		out[k] = next
		used[next] = true
	}
	return out, nil
}

// ParseMeterIDs reads the meter ids the reference (or we) stored in a port's
// other_config under MeterKey keys; other keys and unparsable values are ignored.
func ParseMeterIDs(otherConfig map[string]string) map[string]uint32 {
	out := map[string]uint32{}
	for k, v := range otherConfig {
		if !strings.HasPrefix(k, KindBPS+"_") && !strings.HasPrefix(k, KindPPS+"_") {
			continue
		}
		if !strings.HasSuffix(k, "_"+neutron.DirectionEgress) && !strings.HasSuffix(k, "_"+neutron.DirectionIngress) {
			continue
		}
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil || n == 0 {
			continue
		}
		out[k] = uint32(n)
	}
	return out
}

// IngressQoSSpec is the OVSDB form of an ingress bandwidth limit without meters: the
// port's own linux-htb QoS (external_ids id = the OVS port name) with q as queue 0.
func IngressQoSSpec(portName string, q *Queue) ovsdb.QoSSpec {
	r := QoSFor(neutron.RuleBandwidthLimit, portName)
	return ovsdb.QoSSpec{Type: r.Type, ExternalIDs: r.ExternalIDs, OtherConfig: r.OtherConfig,
		Queues: []ovsdb.QueueSpec{{Num: int(q.QueueNum), ExternalIDs: q.ExternalIDs(), OtherConfig: q.OtherConfig}}}
}

// MinBandwidthQoSSpec is the OVSDB form of the minimum-bandwidth queues: the agent's
// one linux-htb QoS (external_ids id = qosID, a uuid the agent makes at start) set on
// the physical bridges' NICs, with a queue per port (number = its ofport).
func MinBandwidthQoSSpec(qosID string, queues []Queue) ovsdb.QoSSpec {
	r := QoSFor(neutron.RuleMinimumBandwidth, qosID)
	spec := ovsdb.QoSSpec{Type: r.Type, ExternalIDs: r.ExternalIDs, OtherConfig: r.OtherConfig}
	for _, q := range queues {
		spec.Queues = append(spec.Queues, ovsdb.QueueSpec{Num: int(q.QueueNum), ExternalIDs: q.ExternalIDs(), OtherConfig: q.OtherConfig})
	}
	sort.Slice(spec.Queues, func(i, j int) bool { return spec.Queues[i].Num < spec.Queues[j].Num })
	return spec
}
