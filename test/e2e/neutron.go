//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// Neutron is a small client for the real neutron-server's REST API (noauth:
// the project travels in X-Project-Id and in every POST body).
type Neutron struct {
	URL     string // e.g. http://127.0.0.1:9696/v2.0
	Project string
	HTTP    *http.Client
}

// NewNeutron uses $OVSAGENT_NEUTRON_URL or http://127.0.0.1:9696/v2.0.
func NewNeutron(project string) *Neutron {
	u := os.Getenv("OVSAGENT_NEUTRON_URL")
	if u == "" {
		u = "http://127.0.0.1:9696/v2.0"
	}
	return &Neutron{URL: strings.TrimRight(u, "/"), Project: project, HTTP: &http.Client{Timeout: 60 * time.Second}}
}

// APIError is a non-2xx answer.
type APIError struct {
	Method, Path string
	Status       int
	Body         string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("neutron %s %s: HTTP %d: %s", e.Method, e.Path, e.Status, strings.TrimSpace(e.Body))
}

// IsNotFound reports a 404.
func IsNotFound(err error) bool {
	ae, ok := err.(*APIError)
	return ok && ae.Status == http.StatusNotFound
}

// Do sends one request; in (if not nil) is JSON-encoded, out (if not nil) decoded.
func (n *Neutron) Do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, n.URL+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("X-Project-Id", n.Project)
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := n.HTTP.Do(req)
	if err != nil {
		return fmt.Errorf("neutron %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("neutron %s %s: read: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		return &APIError{Method: method, Path: path, Status: resp.StatusCode, Body: string(data)}
	}
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("neutron %s %s: decode: %w", method, path, err)
		}
	}
	return nil
}

// Network is the part of a network the tests look at.
type Network struct {
	ID              string   `json:"id"`
	Name            string   `json:"name"`
	Status          string   `json:"status"`
	AdminStateUp    bool     `json:"admin_state_up"`
	MTU             int      `json:"mtu"`
	NetworkType     string   `json:"provider:network_type"`
	PhysicalNetwork string   `json:"provider:physical_network"`
	SegmentationID  int      `json:"provider:segmentation_id"`
	Subnets         []string `json:"subnets"`
}

// NetworkSpec creates a network; empty provider fields leave the choice to
// the server (a vxlan tenant network in refenv).
type NetworkSpec struct {
	Name            string
	NetworkType     string // vxlan, vlan, flat, gre, geneve
	PhysicalNetwork string
	SegmentationID  int
	PortSecurity    *bool
}

func (n *Neutron) CreateNetwork(ctx context.Context, s NetworkSpec) (*Network, error) {
	body := map[string]any{"name": s.Name, "project_id": n.Project, "admin_state_up": true}
	if s.NetworkType != "" {
		body["provider:network_type"] = s.NetworkType
	}
	if s.PhysicalNetwork != "" {
		body["provider:physical_network"] = s.PhysicalNetwork
	}
	if s.SegmentationID != 0 {
		body["provider:segmentation_id"] = s.SegmentationID
	}
	if s.PortSecurity != nil {
		body["port_security_enabled"] = *s.PortSecurity
	}
	var out struct{ Network Network }
	if err := n.Do(ctx, "POST", "/networks", map[string]any{"network": body}, &out); err != nil {
		return nil, err
	}
	return &out.Network, nil
}

func (n *Neutron) GetNetwork(ctx context.Context, id string) (*Network, error) {
	var out struct{ Network Network }
	if err := n.Do(ctx, "GET", "/networks/"+id, nil, &out); err != nil {
		return nil, err
	}
	return &out.Network, nil
}

func (n *Neutron) UpdateNetwork(ctx context.Context, id string, fields map[string]any) (*Network, error) {
	var out struct{ Network Network }
	if err := n.Do(ctx, "PUT", "/networks/"+id, map[string]any{"network": fields}, &out); err != nil {
		return nil, err
	}
	return &out.Network, nil
}

func (n *Neutron) DeleteNetwork(ctx context.Context, id string) error {
	return n.Do(ctx, "DELETE", "/networks/"+id, nil, nil)
}

// ListNetworks takes query filters such as url.Values{"name": {"x"}}.
func (n *Neutron) ListNetworks(ctx context.Context, q url.Values) ([]Network, error) {
	var out struct{ Networks []Network }
	err := n.Do(ctx, "GET", "/networks"+query(q), nil, &out)
	return out.Networks, err
}

// Subnet is the part of a subnet the tests look at.
type Subnet struct {
	ID        string  `json:"id"`
	Name      string  `json:"name"`
	NetworkID string  `json:"network_id"`
	CIDR      string  `json:"cidr"`
	IPVersion int     `json:"ip_version"`
	GatewayIP *string `json:"gateway_ip"`
}

// SubnetSpec creates an IPv4 subnet without DHCP and, unless Gateway is set,
// without a gateway (the VMs are network namespaces with static addresses).
type SubnetSpec struct {
	Name      string
	NetworkID string
	CIDR      string
	Gateway   string
	IPVersion int // 4 by default
}

func (n *Neutron) CreateSubnet(ctx context.Context, s SubnetSpec) (*Subnet, error) {
	ipv := s.IPVersion
	if ipv == 0 {
		ipv = 4
	}
	body := map[string]any{"name": s.Name, "project_id": n.Project, "network_id": s.NetworkID,
		"ip_version": ipv, "cidr": s.CIDR, "enable_dhcp": false, "gateway_ip": nil}
	if s.Gateway != "" {
		body["gateway_ip"] = s.Gateway
	}
	var out struct{ Subnet Subnet }
	if err := n.Do(ctx, "POST", "/subnets", map[string]any{"subnet": body}, &out); err != nil {
		return nil, err
	}
	return &out.Subnet, nil
}

func (n *Neutron) DeleteSubnet(ctx context.Context, id string) error {
	return n.Do(ctx, "DELETE", "/subnets/"+id, nil, nil)
}

// FixedIP is one address of a port.
type FixedIP struct {
	SubnetID  string `json:"subnet_id,omitempty"`
	IPAddress string `json:"ip_address,omitempty"`
}

// Port is the part of a port the tests look at.
type Port struct {
	ID                  string         `json:"id"`
	Name                string         `json:"name"`
	NetworkID           string         `json:"network_id"`
	MACAddress          string         `json:"mac_address"`
	Status              string         `json:"status"`
	AdminStateUp        bool           `json:"admin_state_up"`
	DeviceID            string         `json:"device_id"`
	DeviceOwner         string         `json:"device_owner"`
	FixedIPs            []FixedIP      `json:"fixed_ips"`
	SecurityGroups      []string       `json:"security_groups"`
	PortSecurityEnabled *bool          `json:"port_security_enabled"`
	HostID              string         `json:"binding:host_id"`
	VIFType             string         `json:"binding:vif_type"`
	VIFDetails          map[string]any `json:"binding:vif_details"`
	AllowedAddressPairs []struct {
		IPAddress  string `json:"ip_address"`
		MACAddress string `json:"mac_address"`
	} `json:"allowed_address_pairs"`
}

// IP is the port's first fixed IP ("" if none).
func (p *Port) IP() string {
	if len(p.FixedIPs) == 0 {
		return ""
	}
	return p.FixedIPs[0].IPAddress
}

// PortSpec creates a compute port bound to HostID (default hv1).
type PortSpec struct {
	Name           string
	NetworkID      string
	HostID         string
	DeviceID       string   // default: a random UUID (the "VM")
	DeviceOwner    string   // default compute:nova
	SecurityGroups []string // nil: the project's default group
	PortSecurity   *bool
	FixedIPs       []FixedIP
	AdminStateUp   *bool
}

func (n *Neutron) CreatePort(ctx context.Context, s PortSpec) (*Port, error) {
	if s.HostID == "" {
		s.HostID = "hv1"
	}
	if s.DeviceID == "" {
		s.DeviceID = newUUID()
	}
	if s.DeviceOwner == "" {
		s.DeviceOwner = "compute:nova"
	}
	body := map[string]any{"name": s.Name, "project_id": n.Project, "network_id": s.NetworkID,
		"binding:host_id": s.HostID, "device_id": s.DeviceID, "device_owner": s.DeviceOwner}
	if s.SecurityGroups != nil {
		body["security_groups"] = s.SecurityGroups
	}
	if s.PortSecurity != nil {
		body["port_security_enabled"] = *s.PortSecurity
	}
	if s.FixedIPs != nil {
		body["fixed_ips"] = s.FixedIPs
	}
	if s.AdminStateUp != nil {
		body["admin_state_up"] = *s.AdminStateUp
	}
	var out struct{ Port Port }
	if err := n.Do(ctx, "POST", "/ports", map[string]any{"port": body}, &out); err != nil {
		return nil, err
	}
	return &out.Port, nil
}

func (n *Neutron) GetPort(ctx context.Context, id string) (*Port, error) {
	var out struct{ Port Port }
	if err := n.Do(ctx, "GET", "/ports/"+id, nil, &out); err != nil {
		return nil, err
	}
	return &out.Port, nil
}

// UpdatePort PUTs fields, e.g. {"admin_state_up": false} or {"security_groups": [...]}.
func (n *Neutron) UpdatePort(ctx context.Context, id string, fields map[string]any) (*Port, error) {
	var out struct{ Port Port }
	if err := n.Do(ctx, "PUT", "/ports/"+id, map[string]any{"port": fields}, &out); err != nil {
		return nil, err
	}
	return &out.Port, nil
}

func (n *Neutron) DeletePort(ctx context.Context, id string) error {
	return n.Do(ctx, "DELETE", "/ports/"+id, nil, nil)
}

func (n *Neutron) ListPorts(ctx context.Context, q url.Values) ([]Port, error) {
	var out struct{ Ports []Port }
	err := n.Do(ctx, "GET", "/ports"+query(q), nil, &out)
	return out.Ports, err
}

// SecurityGroupRule is one rule.
type SecurityGroupRule struct {
	ID              string  `json:"id,omitempty"`
	SecurityGroupID string  `json:"security_group_id"`
	Direction       string  `json:"direction"`           // ingress | egress
	Ethertype       string  `json:"ethertype,omitempty"` // IPv4 | IPv6
	Protocol        *string `json:"protocol"`            // tcp, udp, icmp, a number, or nil for any
	PortRangeMin    *int    `json:"port_range_min"`
	PortRangeMax    *int    `json:"port_range_max"`
	RemoteIPPrefix  *string `json:"remote_ip_prefix"`
	RemoteGroupID   *string `json:"remote_group_id"`
}

// SecurityGroup is a group with its rules.
type SecurityGroup struct {
	ID    string              `json:"id"`
	Name  string              `json:"name"`
	Rules []SecurityGroupRule `json:"security_group_rules"`
}

// CreateSecurityGroup creates a group; neutron adds its two default egress rules.
func (n *Neutron) CreateSecurityGroup(ctx context.Context, name string) (*SecurityGroup, error) {
	var out struct {
		SecurityGroup SecurityGroup `json:"security_group"`
	}
	err := n.Do(ctx, "POST", "/security-groups", map[string]any{"security_group": map[string]any{"name": name, "project_id": n.Project}}, &out)
	if err != nil {
		return nil, err
	}
	return &out.SecurityGroup, nil
}

func (n *Neutron) GetSecurityGroup(ctx context.Context, id string) (*SecurityGroup, error) {
	var out struct {
		SecurityGroup SecurityGroup `json:"security_group"`
	}
	if err := n.Do(ctx, "GET", "/security-groups/"+id, nil, &out); err != nil {
		return nil, err
	}
	return &out.SecurityGroup, nil
}

func (n *Neutron) ListSecurityGroups(ctx context.Context, q url.Values) ([]SecurityGroup, error) {
	var out struct {
		SecurityGroups []SecurityGroup `json:"security_groups"`
	}
	err := n.Do(ctx, "GET", "/security-groups"+query(q), nil, &out)
	return out.SecurityGroups, err
}

func (n *Neutron) DeleteSecurityGroup(ctx context.Context, id string) error {
	return n.Do(ctx, "DELETE", "/security-groups/"+id, nil, nil)
}

// RuleSpec creates a rule; zero fields mean "any".
type RuleSpec struct {
	SecurityGroupID  string
	Direction        string // default ingress
	Ethertype        string // default IPv4
	Protocol         string
	PortMin, PortMax int
	RemoteIPPrefix   string
	RemoteGroupID    string
}

func (n *Neutron) CreateSecurityGroupRule(ctx context.Context, s RuleSpec) (*SecurityGroupRule, error) {
	if s.Direction == "" {
		s.Direction = "ingress"
	}
	if s.Ethertype == "" {
		s.Ethertype = "IPv4"
	}
	body := map[string]any{"security_group_id": s.SecurityGroupID, "direction": s.Direction,
		"ethertype": s.Ethertype, "project_id": n.Project}
	if s.Protocol != "" {
		body["protocol"] = s.Protocol
	}
	if s.PortMin != 0 {
		body["port_range_min"] = s.PortMin
	}
	if s.PortMax != 0 {
		body["port_range_max"] = s.PortMax
	}
	if s.RemoteIPPrefix != "" {
		body["remote_ip_prefix"] = s.RemoteIPPrefix
	}
	if s.RemoteGroupID != "" {
		body["remote_group_id"] = s.RemoteGroupID
	}
	var out struct {
		Rule SecurityGroupRule `json:"security_group_rule"`
	}
	if err := n.Do(ctx, "POST", "/security-group-rules", map[string]any{"security_group_rule": body}, &out); err != nil {
		return nil, err
	}
	return &out.Rule, nil
}

func (n *Neutron) DeleteSecurityGroupRule(ctx context.Context, id string) error {
	return n.Do(ctx, "DELETE", "/security-group-rules/"+id, nil, nil)
}

// AgentInfo is a row of GET /agents.
type AgentInfo struct {
	ID                 string         `json:"id"`
	AgentType          string         `json:"agent_type"`
	Binary             string         `json:"binary"`
	Host               string         `json:"host"`
	Topic              string         `json:"topic"`
	Alive              bool           `json:"alive"`
	AdminStateUp       bool           `json:"admin_state_up"`
	StartedAt          string         `json:"started_at"`
	HeartbeatTimestamp string         `json:"heartbeat_timestamp"`
	Configurations     map[string]any `json:"configurations"`
	ResourceVersions   map[string]any `json:"resource_versions"`
}

func (n *Neutron) ListAgents(ctx context.Context, q url.Values) ([]AgentInfo, error) {
	var out struct{ Agents []AgentInfo }
	err := n.Do(ctx, "GET", "/agents"+query(q), nil, &out)
	return out.Agents, err
}

// OVSAgent returns the Open vSwitch agent row of host, or nil.
func (n *Neutron) OVSAgent(ctx context.Context, host string) (*AgentInfo, error) {
	agents, err := n.ListAgents(ctx, url.Values{"host": {host}, "binary": {"neutron-openvswitch-agent"}})
	if err != nil || len(agents) == 0 {
		return nil, err
	}
	return &agents[0], nil
}

// Neutron has no watch API, so waiting for a status is polling it, at a
// short interval, up to a deadline.
const pollEvery = 100 * time.Millisecond

// WaitPortStatus polls the port until its status is want (ACTIVE, DOWN, ...)
// or timeout passes; it returns the last port seen and the time it took.
func (n *Neutron) WaitPortStatus(ctx context.Context, id, want string, timeout time.Duration) (*Port, time.Duration, error) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last *Port
	for {
		p, err := n.GetPort(ctx, id)
		if err == nil {
			last = p
			if p.Status == want {
				return p, time.Since(start), nil
			}
		}
		select {
		case <-ctx.Done():
			got := "unknown"
			if last != nil {
				got = last.Status
			}
			return last, time.Since(start), fmt.Errorf("port %s: status %s after %s, want %s", id, got, timeout, want)
		case <-time.After(pollEvery):
		}
	}
}

// WaitAgentAlive polls GET /agents until host's OVS agent is alive (want
// true) or not (want false).
func (n *Neutron) WaitAgentAlive(ctx context.Context, host string, want bool, timeout time.Duration) (*AgentInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		a, err := n.OVSAgent(ctx, host)
		if err == nil && a != nil && a.Alive == want {
			return a, nil
		}
		select {
		case <-ctx.Done():
			return a, fmt.Errorf("agent %s: alive != %v after %s", host, want, timeout)
		case <-time.After(pollEvery):
		}
	}
}

func query(q url.Values) string {
	if len(q) == 0 {
		return ""
	}
	return "?" + q.Encode()
}
