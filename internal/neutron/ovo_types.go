package neutron

// Typed OVOs. Each type decodes from its versioned-object envelope (UnmarshalJSON), so
// nested lists and objects decode with plain encoding/json; marshalling gives the plain
// data form (used by golden files and logs), not the envelope.

// Port is Port 1.x: 1.7 in Zed, up to 1.11 (2026.2) decoded; the fields 1.8-1.11 added
// are kept as sent (hints, hardware_offload_type, trusted, pvlan_type, pvlan_community;
// the server leaves an unset one out).
type Port struct {
	ID                   string               `json:"id"`
	ProjectID            string               `json:"project_id,omitempty"`
	Name                 string               `json:"name,omitempty"`
	NetworkID            string               `json:"network_id"`
	MACAddress           string               `json:"mac_address"`
	AdminStateUp         bool                 `json:"admin_state_up"`
	DeviceID             string               `json:"device_id"`
	DeviceOwner          string               `json:"device_owner"`
	Status               string               `json:"status"`
	AllowedAddressPairs  []AllowedAddressPair `json:"allowed_address_pairs"`
	Bindings             []PortBinding        `json:"bindings"`
	BindingLevels        []PortBindingLevel   `json:"binding_levels"`
	DistributedBindings  []PortBinding        `json:"distributed_bindings,omitempty"`
	FixedIPs             []IPAllocation       `json:"fixed_ips"`
	Security             *PortSecurity        `json:"security,omitempty"`
	SecurityGroupIDs     []string             `json:"security_group_ids"`
	QosPolicyID          string               `json:"qos_policy_id,omitempty"`
	QosNetworkPolicyID   string               `json:"qos_network_policy_id,omitempty"`
	NumaAffinityPolicy   string               `json:"numa_affinity_policy,omitempty"`
	DeviceProfile        string               `json:"device_profile,omitempty"`
	PropagateUplinkState *bool                `json:"propagate_uplink_status,omitempty"`
	Hints                *MiscDict            `json:"hints,omitempty"`                 // 1.8, PortHints.hints
	HardwareOffloadType  string               `json:"hardware_offload_type,omitempty"` // 1.9
	Trusted              *bool                `json:"trusted,omitempty"`               // 1.10
	PVLANType            string               `json:"pvlan_type,omitempty"`            // 1.11
	PVLANCommunity       string               `json:"pvlan_community,omitempty"`       // 1.11
	RevisionNumber       int64                `json:"revision_number"`
	CreatedAt            string               `json:"created_at,omitempty"`
	UpdatedAt            string               `json:"updated_at,omitempty"`
	Description          string               `json:"description,omitempty"`
}

// UnmarshalJSON implements json.Unmarshaler over the versioned-object envelope.
func (p *Port) UnmarshalJSON(b []byte) error { return decodePort(b, p) }

// ResourceType implements Resource.
func (p *Port) ResourceType() string { return TypePort }

// ResourceID implements Resource.
func (p *Port) ResourceID() string { return p.ID }

// Revision implements Resource.
func (p *Port) Revision() int64 { return p.RevisionNumber }

// PortSecurityEnabled is the port's port_security_enabled, true when unset (the
// reference's default).
func (p *Port) PortSecurityEnabled() bool {
	if p.Security == nil || p.Security.PortSecurityEnabled == nil {
		return true
	}
	return *p.Security.PortSecurityEnabled
}

// ActiveBinding returns the binding with status ACTIVE, or nil.
func (p *Port) ActiveBinding() *PortBinding {
	for i := range p.Bindings {
		if p.Bindings[i].Status == BindingActive {
			return &p.Bindings[i]
		}
	}
	return nil
}

// BindingOn returns the binding for host with the given status, or nil.
func (p *Port) BindingOn(host, status string) *PortBinding {
	for i := range p.Bindings {
		if p.Bindings[i].Host == host && p.Bindings[i].Status == status {
			return &p.Bindings[i]
		}
	}
	return nil
}

// DeviceOwnerDVRInterface is a distributed router's interface port: bound per host.
const DeviceOwnerDVRInterface = "network:router_interface_distributed"

// DistributedBindingOn returns the distributed binding of host (a DVR router port's), or nil.
func (p *Port) DistributedBindingOn(host string) *PortBinding {
	for i := range p.DistributedBindings {
		if p.DistributedBindings[i].Host == host {
			return &p.DistributedBindings[i]
		}
	}
	return nil
}

// Segment is the segment of the last binding level (the one the L2 agent wires), or nil
// when the port is not bound.
func (p *Port) Segment() *NetworkSegment {
	if len(p.BindingLevels) == 0 {
		return nil
	}
	return p.BindingLevels[len(p.BindingLevels)-1].Segment
}

// Binding statuses.
const (
	BindingActive   = "ACTIVE"
	BindingInactive = "INACTIVE"
)

// PortBinding is PortBinding 1.0 (also DistributedPortBinding's shape).
type PortBinding struct {
	PortID     string   `json:"port_id"`
	Host       string   `json:"host"`
	Profile    MiscDict `json:"profile"`
	VIFType    string   `json:"vif_type"`
	VIFDetails MiscDict `json:"vif_details"`
	VNICType   string   `json:"vnic_type"`
	Status     string   `json:"status"`
}

// UnmarshalJSON implements json.Unmarshaler; both PortBinding and DistributedPortBinding
// are accepted since distributed_bindings carries the latter.
func (b *PortBinding) UnmarshalJSON(data []byte) error {
	type plain PortBinding
	err := unwrap(data, "PortBinding", "1.0", (*plain)(b))
	if err != nil {
		if err2 := unwrap(data, "DistributedPortBinding", "1.0", (*plain)(b)); err2 == nil {
			return nil
		}
	}
	return err
}

// PortBindingLevel is PortBindingLevel 1.1.
type PortBindingLevel struct {
	PortID    string          `json:"port_id"`
	Host      string          `json:"host"`
	Level     int             `json:"level"`
	Driver    string          `json:"driver,omitempty"`
	SegmentID string          `json:"segment_id,omitempty"`
	Segment   *NetworkSegment `json:"segment,omitempty"`
}

// UnmarshalJSON implements json.Unmarshaler.
func (l *PortBindingLevel) UnmarshalJSON(b []byte) error {
	type plain PortBindingLevel
	return unwrap(b, "PortBindingLevel", "1.1", (*plain)(l))
}

// NetworkSegment is NetworkSegment 1.0.
type NetworkSegment struct {
	ID              string   `json:"id"`
	NetworkID       string   `json:"network_id"`
	Name            string   `json:"name,omitempty"`
	NetworkType     string   `json:"network_type"`
	PhysicalNetwork string   `json:"physical_network,omitempty"`
	SegmentationID  *int     `json:"segmentation_id"`
	IsDynamic       bool     `json:"is_dynamic"`
	SegmentIndex    int      `json:"segment_index"`
	Hosts           []string `json:"hosts,omitempty"`
}

// UnmarshalJSON implements json.Unmarshaler.
func (s *NetworkSegment) UnmarshalJSON(b []byte) error {
	type plain NetworkSegment
	return unwrap(b, "NetworkSegment", "1.0", (*plain)(s))
}

// IPAllocation is IPAllocation 1.0 (a port's fixed IP).
type IPAllocation struct {
	PortID    string `json:"port_id,omitempty"`
	SubnetID  string `json:"subnet_id"`
	NetworkID string `json:"network_id,omitempty"`
	IPAddress string `json:"ip_address"`
}

// UnmarshalJSON implements json.Unmarshaler.
func (a *IPAllocation) UnmarshalJSON(b []byte) error {
	type plain IPAllocation
	return unwrap(b, "IPAllocation", "1.0", (*plain)(a))
}

// AllowedAddressPair is AllowedAddressPair 1.0; IPAddress may be a CIDR.
type AllowedAddressPair struct {
	PortID     string `json:"port_id,omitempty"`
	MACAddress string `json:"mac_address"`
	IPAddress  string `json:"ip_address"`
}

// UnmarshalJSON implements json.Unmarshaler.
func (a *AllowedAddressPair) UnmarshalJSON(b []byte) error {
	type plain AllowedAddressPair
	return unwrap(b, "AllowedAddressPair", "1.0", (*plain)(a))
}

// PortSecurity is PortSecurity 1.0 (and NetworkPortSecurity 1.0 on networks).
type PortSecurity struct {
	ID                  string `json:"id,omitempty"`
	PortSecurityEnabled *bool  `json:"port_security_enabled,omitempty"`
}

// UnmarshalJSON implements json.Unmarshaler.
func (s *PortSecurity) UnmarshalJSON(b []byte) error {
	type plain PortSecurity
	err := unwrap(b, "PortSecurity", "1.0", (*plain)(s))
	if err != nil {
		if err2 := unwrap(b, "NetworkPortSecurity", "1.0", (*plain)(s)); err2 == nil {
			return nil
		}
	}
	return err
}

// Network is Network 1.1 (Zed) to 1.3 (2026.2): 1.2 added qinq, 1.3 pvlan.
type Network struct {
	ID                    string           `json:"id"`
	ProjectID             string           `json:"project_id,omitempty"`
	Name                  string           `json:"name,omitempty"`
	Status                string           `json:"status,omitempty"`
	AdminStateUp          *bool            `json:"admin_state_up,omitempty"`
	VLANTransparent       *bool            `json:"vlan_transparent,omitempty"`
	AvailabilityZoneHints []string         `json:"availability_zone_hints,omitempty"`
	Shared                bool             `json:"shared"`
	MTU                   int              `json:"mtu"`
	Security              *PortSecurity    `json:"security,omitempty"`
	Segments              []NetworkSegment `json:"segments"`
	DNSDomain             string           `json:"dns_domain,omitempty"`
	QosPolicyID           string           `json:"qos_policy_id,omitempty"`
	QinQ                  *bool            `json:"qinq,omitempty"`  // 1.2
	PVLAN                 *bool            `json:"pvlan,omitempty"` // 1.3
	RevisionNumber        int64            `json:"revision_number"`
	CreatedAt             string           `json:"created_at,omitempty"`
	UpdatedAt             string           `json:"updated_at,omitempty"`
	Description           string           `json:"description,omitempty"`
}

// UnmarshalJSON implements json.Unmarshaler.
func (n *Network) UnmarshalJSON(b []byte) error { return decodeNetwork(b, n) }

// ResourceType implements Resource.
func (n *Network) ResourceType() string { return TypeNetwork }

// ResourceID implements Resource.
func (n *Network) ResourceID() string { return n.ID }

// Revision implements Resource.
func (n *Network) Revision() int64 { return n.RevisionNumber }

// Subnet is Subnet 1.1 (Zed) or 1.2 (2025.1 on: external).
type Subnet struct {
	ID                string             `json:"id"`
	ProjectID         string             `json:"project_id,omitempty"`
	Name              string             `json:"name,omitempty"`
	NetworkID         string             `json:"network_id"`
	SegmentID         string             `json:"segment_id,omitempty"`
	SubnetPoolID      string             `json:"subnetpool_id,omitempty"`
	IPVersion         int                `json:"ip_version"`
	CIDR              string             `json:"cidr"`
	GatewayIP         string             `json:"gateway_ip,omitempty"`
	AllocationPools   []IPAllocationPool `json:"allocation_pools,omitempty"`
	EnableDHCP        *bool              `json:"enable_dhcp,omitempty"`
	Shared            *bool              `json:"shared,omitempty"`
	DNSNameservers    []DNSNameServer    `json:"dns_nameservers,omitempty"`
	DNSPublishFixedIP *bool              `json:"dns_publish_fixed_ip,omitempty"`
	HostRoutes        []Route            `json:"host_routes,omitempty"`
	IPv6RAMode        string             `json:"ipv6_ra_mode,omitempty"`
	IPv6AddressMode   string             `json:"ipv6_address_mode,omitempty"`
	ServiceTypes      []string           `json:"service_types,omitempty"`
	External          *bool              `json:"external,omitempty"` // 1.2
	RevisionNumber    int64              `json:"revision_number"`
	CreatedAt         string             `json:"created_at,omitempty"`
	UpdatedAt         string             `json:"updated_at,omitempty"`
	Description       string             `json:"description,omitempty"`
}

// UnmarshalJSON implements json.Unmarshaler.
func (s *Subnet) UnmarshalJSON(b []byte) error { return decodeSubnet(b, s) }

// ResourceType implements Resource.
func (s *Subnet) ResourceType() string { return TypeSubnet }

// ResourceID implements Resource.
func (s *Subnet) ResourceID() string { return s.ID }

// Revision implements Resource.
func (s *Subnet) Revision() int64 { return s.RevisionNumber }

// IPAllocationPool is IPAllocationPool 1.0.
type IPAllocationPool struct {
	ID       string `json:"id,omitempty"`
	SubnetID string `json:"subnet_id,omitempty"`
	Start    string `json:"start"`
	End      string `json:"end"`
}

// UnmarshalJSON implements json.Unmarshaler.
func (p *IPAllocationPool) UnmarshalJSON(b []byte) error {
	type plain IPAllocationPool
	return unwrap(b, "IPAllocationPool", "1.0", (*plain)(p))
}

// DNSNameServer is DNSNameServer 1.0.
type DNSNameServer struct {
	Address  string `json:"address"`
	SubnetID string `json:"subnet_id,omitempty"`
	Order    int    `json:"order"`
}

// UnmarshalJSON implements json.Unmarshaler.
func (d *DNSNameServer) UnmarshalJSON(b []byte) error {
	type plain DNSNameServer
	return unwrap(b, "DNSNameServer", "1.0", (*plain)(d))
}

// Route is Route 1.0 (a subnet host route).
type Route struct {
	SubnetID    string `json:"subnet_id,omitempty"`
	Destination string `json:"destination"`
	Nexthop     string `json:"nexthop"`
}

// UnmarshalJSON implements json.Unmarshaler.
func (r *Route) UnmarshalJSON(b []byte) error {
	type plain Route
	return unwrap(b, "Route", "1.0", (*plain)(r))
}

// SecurityGroup is SecurityGroup 1.5 (Zed) or 1.6 (2025.1 on: its rules at
// SecurityGroupRule 1.3).
type SecurityGroup struct {
	ID             string              `json:"id"`
	Name           string              `json:"name,omitempty"`
	ProjectID      string              `json:"project_id,omitempty"`
	Shared         *bool               `json:"shared,omitempty"`
	Stateful       bool                `json:"stateful"`
	IsDefault      bool                `json:"is_default"`
	Rules          []SecurityGroupRule `json:"rules"`
	RevisionNumber int64               `json:"revision_number"`
	CreatedAt      string              `json:"created_at,omitempty"`
	UpdatedAt      string              `json:"updated_at,omitempty"`
	Description    string              `json:"description,omitempty"`
}

// UnmarshalJSON implements json.Unmarshaler.
func (g *SecurityGroup) UnmarshalJSON(b []byte) error { return decodeSecurityGroup(b, g) }

// ResourceType implements Resource.
func (g *SecurityGroup) ResourceType() string { return TypeSecurityGroup }

// ResourceID implements Resource.
func (g *SecurityGroup) ResourceID() string { return g.ID }

// Revision implements Resource.
func (g *SecurityGroup) Revision() int64 { return g.RevisionNumber }

// SecurityGroupRule is SecurityGroupRule 1.2.
type SecurityGroupRule struct {
	ID                   string     `json:"id"`
	ProjectID            string     `json:"project_id,omitempty"`
	SecurityGroupID      string     `json:"security_group_id"`
	RemoteGroupID        string     `json:"remote_group_id,omitempty"`
	Direction            string     `json:"direction,omitempty"`
	Ethertype            string     `json:"ethertype,omitempty"`
	Protocol             FlexString `json:"protocol,omitempty"`
	PortRangeMin         *int       `json:"port_range_min,omitempty"`
	PortRangeMax         *int       `json:"port_range_max,omitempty"`
	RemoteIPPrefix       string     `json:"remote_ip_prefix,omitempty"`
	RemoteAddressGroupID string     `json:"remote_address_group_id,omitempty"`
	NormalizedCIDR       string     `json:"normalized_cidr,omitempty"`
	BelongsToDefaultSG   bool       `json:"belongs_to_default_sg,omitempty"` // 1.3
	RevisionNumber       int64      `json:"revision_number"`
	CreatedAt            string     `json:"created_at,omitempty"`
	UpdatedAt            string     `json:"updated_at,omitempty"`
	Description          string     `json:"description,omitempty"`
}

// UnmarshalJSON implements json.Unmarshaler.
func (r *SecurityGroupRule) UnmarshalJSON(b []byte) error { return decodeSecurityGroupRule(b, r) }

// ResourceType implements Resource.
func (r *SecurityGroupRule) ResourceType() string { return TypeSecurityGroupRule }

// ResourceID implements Resource.
func (r *SecurityGroupRule) ResourceID() string { return r.ID }

// Revision implements Resource.
func (r *SecurityGroupRule) Revision() int64 { return r.RevisionNumber }

// AddressGroup is AddressGroup 1.2.
type AddressGroup struct {
	ID             string               `json:"id"`
	Name           string               `json:"name,omitempty"`
	ProjectID      string               `json:"project_id,omitempty"`
	Shared         bool                 `json:"shared"`
	Addresses      []AddressAssociation `json:"addresses"`
	RevisionNumber int64                `json:"revision_number"`
	CreatedAt      string               `json:"created_at,omitempty"`
	UpdatedAt      string               `json:"updated_at,omitempty"`
	Description    string               `json:"description,omitempty"`
}

// UnmarshalJSON implements json.Unmarshaler.
func (g *AddressGroup) UnmarshalJSON(b []byte) error { return decodeAddressGroup(b, g) }

// ResourceType implements Resource.
func (g *AddressGroup) ResourceType() string { return TypeAddressGroup }

// ResourceID implements Resource.
func (g *AddressGroup) ResourceID() string { return g.ID }

// Revision implements Resource.
func (g *AddressGroup) Revision() int64 { return g.RevisionNumber }

// AddressAssociation is AddressAssociation 1.0.
type AddressAssociation struct {
	Address        string `json:"address"`
	AddressGroupID string `json:"address_group_id,omitempty"`
}

// UnmarshalJSON implements json.Unmarshaler.
func (a *AddressAssociation) UnmarshalJSON(b []byte) error {
	type plain AddressAssociation
	return unwrap(b, "AddressAssociation", "1.0", (*plain)(a))
}
