package pipeline

// Table is one declared OpenFlow table: its fixed number and the reference
// constant's name (for logs, `explain`, and tests).
type Table struct {
	ID   uint8
	Name string
}

// br-int tables (neutron_lib/plugins/ml2/ovs_constants.py, neutron-lib 3.x as
// neutron 2026.2 uses it: PACKET_RATE_LIMIT moved from 59 to 58 when
// BANDWIDTH_RATE_LIMIT took 59, so every entry path runs 0/30/31 -> 58 -> 59 -> 60).
var (
	IntLocalSwitching        = Table{0, "LOCAL_SWITCHING"}
	IntDVRToSrcMAC           = Table{1, "DVR_TO_SRC_MAC"}
	IntDVRToSrcMACPhysical   = Table{2, "DVR_TO_SRC_MAC_PHYSICAL"}
	IntARPDVRMACToDstMAC     = Table{3, "ARP_DVR_MAC_TO_DST_MAC"}
	IntARPDVRMACToDstMACPhys = Table{4, "ARP_DVR_MAC_TO_DST_MAC_PHYSICAL"}
	IntCanary                = Table{23, "CANARY"}
	IntARPSpoof              = Table{24, "ARP_SPOOF"}
	IntMACSpoof              = Table{25, "MAC_SPOOF"}
	IntLocalEgress           = Table{30, "LOCAL_EGRESS"}
	IntLocalIP               = Table{31, "LOCAL_IP"}
	IntPacketRateLimit       = Table{58, "PACKET_RATE_LIMIT"}
	IntBandwidthRateLimit    = Table{59, "BANDWIDTH_RATE_LIMIT"}
	IntTransient             = Table{60, "TRANSIENT"}
	IntLocalMACDirect        = Table{61, "LOCAL_MAC_DIRECT"}
	IntTransientEgress       = Table{62, "TRANSIENT_EGRESS"}
	IntDHCPv4                = Table{77, "DHCP_IPV4"}
	IntDHCPv6                = Table{78, "DHCP_IPV6"}

	// Firewall tables: the flows in them belong to internal/firewall; the
	// pipeline only sends traffic into them (table 60).
	IntBaseEgress                = Table{71, "BASE_EGRESS"}
	IntRulesEgress               = Table{72, "RULES_EGRESS"}
	IntAcceptOrIngress           = Table{73, "ACCEPT_OR_INGRESS"}
	IntBaseIngress               = Table{81, "BASE_INGRESS"}
	IntRulesIngress              = Table{82, "RULES_INGRESS"}
	IntAcceptedEgressTraffic     = Table{91, "ACCEPTED_EGRESS_TRAFFIC"}
	IntAcceptedIngressTraffic    = Table{92, "ACCEPTED_INGRESS_TRAFFIC"}
	IntDroppedTraffic            = Table{93, "DROPPED_TRAFFIC"}
	IntAcceptedEgressTrafficNorm = Table{94, "ACCEPTED_EGRESS_TRAFFIC_NORMAL"}
)

// br-tun tables.
var (
	TunLocalSwitching = Table{0, "LOCAL_SWITCHING"}
	TunDVRProcess     = Table{1, "DVR_PROCESS"}
	TunPatchLVToTun   = Table{2, "PATCH_LV_TO_TUN"}
	TunGRETunToLV     = Table{3, "GRE_TUN_TO_LV"}
	TunVXLANTunToLV   = Table{4, "VXLAN_TUN_TO_LV"}
	TunGeneveTunToLV  = Table{6, "GENEVE_TUN_TO_LV"}
	TunDVRNotLearn    = Table{9, "DVR_NOT_LEARN"}
	TunLearnFromTun   = Table{10, "LEARN_FROM_TUN"}
	TunUcastToTun     = Table{20, "UCAST_TO_TUN"}
	TunARPResponder   = Table{21, "ARP_RESPONDER"}
	TunFloodToTun     = Table{22, "FLOOD_TO_TUN"}
)

// Physical bridge tables.
var (
	PhysLocalSwitching       = Table{0, "LOCAL_SWITCHING"}
	PhysDVRProcess           = Table{1, "DVR_PROCESS_PHYSICAL"}
	PhysLocalVLANTranslation = Table{2, "LOCAL_VLAN_TRANSLATION"}
	PhysDVRNotLearn          = Table{3, "DVR_NOT_LEARN_PHYSICAL"}
	// The metadata_path extension's tables (neutron 2025.2+); ovs-agent
	// installs nothing there, but the reference sweeps them at start.
	PhysMetadataEgressNAT     = Table{80, "METADATA_EGRESS_NAT"}
	PhysMetadataEgressOutput  = Table{87, "METADATA_EGRESS_OUTPUT"}
	PhysMetadataARPResponder  = Table{90, "METADATA_IP_ARP_RESPONDER"}
	PhysMetadataIngressDirect = Table{91, "METADATA_INGRESS_DIRECT"}
)

// IntTables, TunTables and PhysTables are the tables the reference agent
// sweeps for stale flows on its first iteration (INT_BR_ALL_TABLES etc.);
// the takeover path uses the same lists so it deletes no more and no less.
var (
	IntTables = []Table{IntLocalSwitching, IntDVRToSrcMAC, IntDVRToSrcMACPhysical, IntCanary,
		IntARPSpoof, IntMACSpoof, IntLocalMACDirect, IntLocalEgress, IntLocalIP, IntPacketRateLimit,
		IntBandwidthRateLimit, IntTransient, IntTransientEgress, IntBaseEgress, IntRulesEgress, IntAcceptOrIngress,
		IntDHCPv4, IntDHCPv6, IntBaseIngress, IntRulesIngress, IntAcceptedEgressTraffic,
		IntAcceptedIngressTraffic, IntDroppedTraffic}
	TunTables = []Table{TunLocalSwitching, TunDVRProcess, TunPatchLVToTun, TunGRETunToLV,
		TunVXLANTunToLV, TunGeneveTunToLV, TunDVRNotLearn, TunLearnFromTun, TunUcastToTun,
		TunARPResponder, TunFloodToTun}
	PhysTables = []Table{PhysLocalSwitching, PhysDVRProcess, PhysLocalVLANTranslation, PhysDVRNotLearn,
		PhysMetadataEgressNAT, PhysMetadataEgressOutput, PhysMetadataARPResponder, PhysMetadataIngressDirect}
)

// TableName returns the reference name of table id in tables (IntTables,
// TunTables or PhysTables), or "" when it is not declared there.
func TableName(tables []Table, id uint8) string {
	for _, t := range tables {
		if t.ID == id {
			return t.Name
		}
	}
	return ""
}

// IsFirewallTable reports whether table t on br-int is one of the OVS
// firewall's tables (71-94), whose flows internal/firewall computes.
func IsFirewallTable(t uint8) bool { return t >= 71 && t <= 94 && t != 77 && t != 78 }

// Priorities used by more than one feature.
const (
	prioMax = 65535 // OPENFLOW_MAX_PRIORITY
)

// DeadVLAN is the tag of ports that must not pass traffic (DEAD_VLAN_TAG).
const DeadVLAN = 4095

// Firewall registers (openvswitch_firewall/constants.py).
const (
	RegPort = 5 // reg5: the port's ofport
	RegNet  = 6 // reg6: the local VLAN, also the conntrack zone
)

// tunTable returns the br-tun table that maps a tunnel id to a local VLAN for
// a tunnel network type.
func tunTable(t NetworkType) (Table, bool) {
	switch t {
	case TypeGRE:
		return TunGRETunToLV, true
	case TypeVXLAN:
		return TunVXLANTunToLV, true
	case TypeGeneve:
		return TunGeneveTunToLV, true
	}
	return Table{}, false
}
