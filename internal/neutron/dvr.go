package neutron

import (
	"context"
	"encoding/json"
	"fmt"
)

// The DVR plugin RPCs of the reference agent (neutron/api/rpc/handlers/dvr_rpc.py,
// DVRServerRpcApi): topic q-plugin, version 1.0, no namespace (neutron_lib's
// RPC_NAMESPACE_DVR is None). Replies as the 2026.2 server sends them are in
// testdata/dvr/2026.2-replies.json (refenv/dvr.sh rpc). Nothing calls these yet: DVR is
// refused at load until issue 16 lands.

func dvrTarget() Target { return pluginTarget("1.0") }

// DVRHostMAC is one host's DVR MAC as the server sends it: MAC in netaddr's default
// dialect, "FA-16-3F-8E-8E-11" (internal/dvr.ParseHostMAC reads it).
type DVRHostMAC struct {
	Host string `json:"host"`
	MAC  string `json:"mac_address"`
}

// GetDVRMACAddressByHost returns this host's DVR MAC; the server allocates it on the first
// call (from dvr_base_mac) and casts dvr_mac_address_update to every agent.
func (c *Client) GetDVRMACAddressByHost(ctx context.Context) (DVRHostMAC, error) {
	var r DVRHostMAC
	if err := c.call(ctx, dvrTarget(), "get_dvr_mac_address_by_host", map[string]any{"host": c.host}, 0, &r); err != nil {
		return r, err
	}
	if r.MAC == "" {
		return r, fmt.Errorf("%w: get_dvr_mac_address_by_host: no mac_address for %s", ErrBadReply, c.host)
	}
	return r, nil
}

// GetDVRMACAddressList returns every DVR host's MAC, this host's included.
func (c *Client) GetDVRMACAddressList(ctx context.Context) ([]DVRHostMAC, error) {
	var r []DVRHostMAC
	if err := c.call(ctx, dvrTarget(), "get_dvr_mac_address_list", map[string]any{}, 0, &r); err != nil {
		return nil, err
	}
	return r, nil
}

// DVRFixedIP is a fixed IP as get_subnet_for_dvr takes it.
type DVRFixedIP struct {
	SubnetID  string `json:"subnet_id"`
	IPAddress string `json:"ip_address"`
}

// DVRSubnet is get_subnet_for_dvr's subnet dict plus gateway_mac: the MAC of the port
// holding fixed_ips[0]'s address (the router interface) when fixed_ips are given, else of
// the port holding the subnet's gateway_ip. Raw keeps every key.
type DVRSubnet struct {
	ID         string          `json:"id"`
	NetworkID  string          `json:"network_id"`
	CIDR       string          `json:"cidr"`
	IPVersion  int             `json:"ip_version"`
	GatewayIP  *string         `json:"gateway_ip"`
	GatewayMAC *string         `json:"gateway_mac"`
	Raw        json.RawMessage `json:"-"`
}

// GetSubnetForDVR returns the subnet's dict. The reference passes the router interface's
// fixed_ips when it binds a router interface and nil for a centralized SNAT port (the
// server then looks the gateway port up by the subnet's gateway_ip). An empty reply ({}:
// the subnet or its gateway is gone) is returned as ok=false, as the reference skips it.
func (c *Client) GetSubnetForDVR(ctx context.Context, subnetID string, fixedIPs []DVRFixedIP) (s DVRSubnet, ok bool, err error) {
	var raw json.RawMessage
	args := map[string]any{"subnet": subnetID, "fixed_ips": fixedIPs}
	if fixedIPs == nil {
		args["fixed_ips"] = nil
	}
	if err := c.call(ctx, dvrTarget(), "get_subnet_for_dvr", args, 0, &raw); err != nil {
		return s, false, err
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return s, false, fmt.Errorf("%w: get_subnet_for_dvr: %v", ErrBadReply, err)
	}
	if s.ID == "" {
		return s, false, nil
	}
	s.Raw = raw
	return s, true, nil
}

// DVRPort is a port of get_ports_on_host_by_subnet / get_ports, the keys DVR reads.
type DVRPort struct {
	ID                  string `json:"id"`
	MAC                 string `json:"mac_address"`
	DeviceOwner         string `json:"device_owner"`
	NetworkID           string `json:"network_id"`
	AllowedAddressPairs []struct {
		IPAddress  string `json:"ip_address"`
		MACAddress string `json:"mac_address"`
	} `json:"allowed_address_pairs,omitempty"`
	FixedIPs []DVRFixedIP `json:"fixed_ips,omitempty"`
}

// GetPortsOnHostBySubnet returns the DVR-serviced ports (compute:*, DHCP, load balancers;
// not the csnat port) bound to this host with an address on subnet.
func (c *Client) GetPortsOnHostBySubnet(ctx context.Context, subnetID string) ([]DVRPort, error) {
	var r []DVRPort
	args := map[string]any{"host": c.host, "subnet": subnetID}
	if err := c.call(ctx, dvrTarget(), "get_ports_on_host_by_subnet", args, 0, &r); err != nil {
		return nil, err
	}
	return r, nil
}

// GetPorts returns the full port dicts of ids (the reference reads their allowed address
// pairs when it binds or unbinds a DVR-serviced port).
func (c *Client) GetPorts(ctx context.Context, ids []string) ([]DVRPort, error) {
	var r []DVRPort
	args := map[string]any{"filters": map[string]any{"id": ids}}
	if err := c.call(ctx, dvrTarget(), "get_ports", args, 0, &r); err != nil {
		return nil, err
	}
	return r, nil
}
