package neutron

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/ovsagent/ovsagent/internal/oslo"
)

// Topics the agent sends to.
const (
	TopicPlugin  = "q-plugin"
	TopicReports = "q-reports-plugin"
)

// DefaultDeviceListStep is the reference's rpc_resources_processing_step.
const DefaultDeviceListStep = 20

// AgentID is the agent_id the reference OVS agent sends for host.
func AgentID(host string) string { return "ovs-agent-" + host }

// ErrBadReply is wrapped by errors for replies that do not have the documented shape.
var ErrBadReply = errors.New("neutron: unexpected reply")

// Client is the typed plugin (q-plugin) and state (q-reports-plugin) RPC API of the OVS
// agent. Safe for concurrent use.
type Client struct {
	rpc  RPC
	host string

	// DeviceListStep chunks update_device_list like the reference's
	// rpc_resources_processing_step; <= 0 means DefaultDeviceListStep. The agent may raise
	// it to send fewer, larger calls.
	DeviceListStep int
	// Timeout of plugin calls; 0 uses the transport default (rpc_response_timeout).
	Timeout time.Duration
	// Versions, if set, negotiates the OVO versions of pulls with the server
	// (versions.go); nil pulls every type at ResourceVersions.
	Versions *Negotiator
}

// NewClient returns a client sending as host (CONF.host).
func NewClient(rpc RPC, host string) *Client {
	return &Client{rpc: rpc, host: host}
}

// Host is the host the client reports as.
func (c *Client) Host() string { return c.host }

func pluginTarget(version string) Target  { return Target{Topic: TopicPlugin, Version: version} }
func reportsTarget(version string) Target { return Target{Topic: TopicReports, Version: version} }

func (c *Client) call(ctx context.Context, tgt Target, method string, args any, timeout time.Duration, out any) error {
	if timeout == 0 {
		timeout = c.Timeout
	}
	raw, err := c.rpc.Call(ctx, tgt, method, args, timeout)
	if err != nil {
		return fmt.Errorf("neutron: %s: %w", method, err)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrBadReply, method, err)
	}
	return nil
}

// HasAliveNeutronServer asks the server whether it is up (q-reports-plugin 1.2). The
// agent loops on it before starting consumers.
func (c *Client) HasAliveNeutronServer(ctx context.Context) (bool, error) {
	var alive *bool
	if err := c.call(ctx, reportsTarget("1.2"), "has_alive_neutron_server", struct{}{}, 0, &alive); err != nil {
		return false, err
	}
	// Zed returns true; later releases may answer false (database down) or null.
	return alive != nil && *alive, nil
}

// BulkPull fetches every resource of rtype matching filter (q-plugin 1.1). A type the
// Versions negotiator handles is asked for at its negotiated version, one version lower
// after each refusal (versions.go); the others at ResourceVersions. It implements Puller.
func (c *Client) BulkPull(ctx context.Context, rtype string, filter Filter) ([]Resource, error) {
	rs, _, err := c.BulkPullVersions(ctx, rtype, filter)
	return rs, err
}

// BulkPullVersions is BulkPull with the OVO version each object was pulled at
// (versions[i] is that of rs[i]). It implements VersionedPuller. Objects of the reply
// that could not be decoded are left out and named by a *BadObjectsError returned with
// the others (SplitPullError).
func (c *Client) BulkPullVersions(ctx context.Context, rtype string, filter Filter) (rs []Resource, versions []string, err error) {
	if filter == nil {
		filter = Filter{}
	}
	neg := c.Versions
	if !neg.Negotiates(rtype) {
		ver, ok := ResourceVersions[rtype]
		if !ok {
			return nil, nil, fmt.Errorf("neutron: bulk_pull: unknown resource type %q", rtype)
		}
		return isolating(filter, func(f Filter) ([]Resource, string, error) {
			rs, err := c.bulkPullAt(ctx, rtype, ver, f)
			return rs, ver, err
		}, rtype)
	}
	unlock, unproven := neg.lockUnproven(rtype)
	defer unlock()
	ids, byID := filter["id"]
	pull := func(f Filter) ([]Resource, string, error) { return c.negotiatedPull(ctx, rtype, f) }
	if !unproven || !byID || len(filter) != 1 || len(ids) < 2 {
		return isolating(filter, pull, rtype)
	}
	// Unproven: one id first, so that a refusal costs the server one object, not
	// thousands (bulk_pull has no pager: it loads every match before the first
	// obj_to_primitive raises).
	first, ver1, err1 := isolating(Filter{"id": ids[:1]}, pull, rtype)
	if _, failed := SplitPullError(err1); failed {
		return nil, nil, err1
	}
	rest, ver2, err2 := isolating(Filter{"id": ids[1:]}, pull, rtype)
	if _, failed := SplitPullError(err2); failed {
		return nil, nil, err2
	}
	return append(first, rest...), append(ver1, ver2...), errors.Join(err1, err2)
}

// isolating is pull (one bulk_pull of rtype) for filter, isolating the objects the
// server raises on. The server serialises every object of a reply in one go, so an
// exception for one (a *oslo.RemoteError that is no version refusal) fails the
// whole pull: a pull of several ids is then asked again as two halves, and for one
// id the exception is that object's answer, a bad object (the server answered, with
// an error: a refusal for its port, not an outage). One object the server cannot
// produce costs that object alone, not the batch of ports pulled with it, at about
// two calls per halving. Timeouts and transport errors stay the pull's failure.
func isolating(filter Filter, pull func(Filter) ([]Resource, string, error), rtype string) ([]Resource, []string, error) {
	rs, ver, err := pull(filter)
	var re *oslo.RemoteError
	ids, byID := filter["id"]
	if err == nil || !errors.As(err, &re) || IsVersionRefused(err) || !byID || len(filter) != 1 || len(ids) == 0 {
		return rs, versionsOf(rs, ver, nil), err
	}
	if len(ids) == 1 {
		return nil, nil, &BadObjectsError{Type: rtype, Objects: []BadObject{{ID: ids[0], Err: fmt.Errorf("the server raised: %w", err)}}}
	}
	h := len(ids) / 2
	a, va, ea := isolating(Filter{"id": ids[:h]}, pull, rtype)
	if _, failed := SplitPullError(ea); failed {
		return nil, nil, ea
	}
	b, vb, eb := isolating(Filter{"id": ids[h:]}, pull, rtype)
	if _, failed := SplitPullError(eb); failed {
		return nil, nil, eb
	}
	return append(a, b...), append(va, vb...), errors.Join(ea, eb)
}

// versionsOf appends ver to versions once for each of rs.
func versionsOf(rs []Resource, ver string, versions []string) []string {
	for range rs {
		versions = append(versions, ver)
	}
	return versions
}

// negotiatedPull pulls at the negotiated version, stepping down on refusals; it returns
// the version the objects were pulled at. Objects that could not be decoded are
// reported with the others (a *BadObjectsError), as bulkPullAt does.
func (c *Client) negotiatedPull(ctx context.Context, rtype string, filter Filter) ([]Resource, string, error) {
	for {
		ver := c.Versions.PullVersion(rtype)
		rs, err := c.bulkPullAt(ctx, rtype, ver, filter)
		if IsVersionRefused(err) && c.Versions.Refused(rtype, ver) {
			continue
		}
		if _, failed := SplitPullError(err); failed {
			return nil, "", err
		}
		c.Versions.Produced(rtype, ver, len(rs))
		if rtype == TypePort && len(rs) > 0 {
			c.probeRelated(rs[0])
		}
		return rs, ver, err
	}
}

// ProbeVersions pulls r back by id to settle the version of its type (Negotiator.Saw);
// the object is not kept.
func (c *Client) ProbeVersions(r Resource) {
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if _, err := c.BulkPull(ctx, r.ResourceType(), Filter{"id": {r.ResourceID()}}); err != nil {
		slog.Warn("neutron: version probe failed; the type stays at the version agreed so far", "type", r.ResourceType(), "err", err)
	}
}

// probeRelated settles, off the caller's path, the versions of the types a port
// names that are still unproven: the agent may never pull them (networks and subnets
// usually reach the cache by push), and without a pull they would stay at the
// baseline. One small bulk_pull per type, once a pull returned a port; the objects are
// not kept (the agent pulls what it needs itself).
func (c *Client) probeRelated(r Resource) {
	p, ok := r.(*Port)
	if !ok || !c.Versions.startProbe() {
		return
	}
	probes := map[string]Filter{TypeNetwork: {"id": {p.NetworkID}}}
	if len(p.FixedIPs) > 0 {
		probes[TypeSubnet] = Filter{"id": {p.FixedIPs[0].SubnetID}}
	}
	if len(p.SecurityGroupIDs) > 0 {
		probes[TypeSecurityGroup] = Filter{"id": {p.SecurityGroupIDs[0]}}
		probes[TypeSecurityGroupRule] = Filter{"security_group_id": {p.SecurityGroupIDs[0]}}
	}
	go func() {
		defer c.Versions.endProbe()
		timeout := c.Timeout
		if timeout <= 0 {
			timeout = time.Minute
		}
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		for rt, f := range probes {
			if c.Versions.Confirmed(rt) {
				continue
			}
			if _, err := c.BulkPull(ctx, rt, f); err != nil {
				slog.Warn("neutron: version probe failed; the type stays at the version agreed so far", "type", rt, "err", err)
			}
		}
	}()
}

func (c *Client) bulkPullAt(ctx context.Context, rtype, ver string, filter Filter) ([]Resource, error) {
	args := map[string]any{"resource_type": rtype, "version": ver, "filter_kwargs": filter}
	var raw json.RawMessage
	if err := c.call(ctx, pluginTarget("1.1"), "bulk_pull", args, 0, &raw); err != nil {
		return nil, err
	}
	if string(raw) == "null" {
		return nil, nil
	}
	// Object by object: what could be decoded is returned with the *BadObjectsError
	// naming the rest.
	rs, err := decodePulled(rtype, raw)
	if err != nil {
		slog.Warn("neutron: bulk_pull: objects that could not be decoded were left out; the rest of the reply is used",
			"type", rtype, "decoded", len(rs), "err", err)
	}
	return rs, err
}

// Pull fetches one resource by id (q-plugin 1.1); nil if the server has none. Versions
// as BulkPull.
func (c *Client) Pull(ctx context.Context, rtype, id string) (Resource, error) {
	neg := c.Versions
	if !neg.Negotiates(rtype) {
		ver, ok := ResourceVersions[rtype]
		if !ok {
			return nil, fmt.Errorf("neutron: pull: unknown resource type %q", rtype)
		}
		return c.pullAt(ctx, rtype, ver, id)
	}
	for {
		ver := neg.PullVersion(rtype)
		r, err := c.pullAt(ctx, rtype, ver, id)
		if IsVersionRefused(err) && neg.Refused(rtype, ver) {
			continue
		}
		if err != nil {
			return nil, err
		}
		n := 0
		if r != nil {
			n = 1
		}
		neg.Produced(rtype, ver, n)
		return r, nil
	}
}

func (c *Client) pullAt(ctx context.Context, rtype, ver, id string) (Resource, error) {
	args := map[string]any{"resource_type": rtype, "version": ver, "resource_id": id}
	var raw json.RawMessage
	if err := c.call(ctx, pluginTarget("1.1"), "pull", args, 0, &raw); err != nil {
		return nil, err
	}
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	return DecodeResource(raw)
}

// DeviceDown is one entry of update_device_list's devices_down result.
type DeviceDown struct {
	Device string `json:"device"`
	Exists bool   `json:"exists"`
}

// DeviceListResult is update_device_list's merged result.
type DeviceListResult struct {
	DevicesUp         []string     `json:"devices_up"`
	FailedDevicesUp   []string     `json:"failed_devices_up"`
	DevicesDown       []DeviceDown `json:"devices_down"`
	FailedDevicesDown []string     `json:"failed_devices_down"`
}

// UpdateDeviceList reports ports up (turning them ACTIVE) and down (q-plugin 1.9). Both
// lists are sent in chunks of DeviceListStep, as the reference does, and the results are
// merged. On an error the result holds what the chunks before it returned.
func (c *Client) UpdateDeviceList(ctx context.Context, up, down []string, refreshTunnels bool) (DeviceListResult, error) {
	res := DeviceListResult{DevicesUp: []string{}, FailedDevicesUp: []string{}, DevicesDown: []DeviceDown{}, FailedDevicesDown: []string{}}
	step := c.DeviceListStep
	if step <= 0 {
		step = DefaultDeviceListStep
	}
	n := max(len(up), len(down))
	for i := 0; i < n; i += step {
		args := map[string]any{
			"devices_up":      chunk(up, i, step),
			"devices_down":    chunk(down, i, step),
			"agent_id":        AgentID(c.host),
			"host":            c.host,
			"refresh_tunnels": refreshTunnels,
		}
		var r DeviceListResult
		if err := c.call(ctx, pluginTarget("1.9"), "update_device_list", args, 0, &r); err != nil {
			return res, err
		}
		res.DevicesUp = append(res.DevicesUp, r.DevicesUp...)
		res.FailedDevicesUp = append(res.FailedDevicesUp, r.FailedDevicesUp...)
		res.DevicesDown = append(res.DevicesDown, r.DevicesDown...)
		res.FailedDevicesDown = append(res.FailedDevicesDown, r.FailedDevicesDown...)
	}
	return res, nil
}

func chunk(l []string, i, step int) []string {
	if i >= len(l) {
		return []string{}
	}
	return l[i:min(i+step, len(l))]
}

// UpdateDeviceDown reports one port down (q-plugin 1.9), used for admin-down ports.
func (c *Client) UpdateDeviceDown(ctx context.Context, device string) (DeviceDown, error) {
	var r DeviceDown
	args := map[string]any{"device": device, "agent_id": AgentID(c.host), "host": c.host}
	err := c.call(ctx, pluginTarget("1.9"), "update_device_down", args, 0, &r)
	return r, err
}

// Tunnel is one peer endpoint returned by tunnel_sync.
type Tunnel struct {
	IPAddress string `json:"ip_address"`
	Host      string `json:"host,omitempty"`
	UDPPort   int    `json:"udp_port,omitempty"`
}

// TunnelSync registers this host's tunnel endpoint and returns all known endpoints
// (q-plugin 1.4). The server also fans out tunnel_update to every agent.
func (c *Client) TunnelSync(ctx context.Context, tunnelIP, tunnelType string) ([]Tunnel, error) {
	var r struct {
		Tunnels []Tunnel `json:"tunnels"`
	}
	args := map[string]any{"tunnel_ip": tunnelIP, "tunnel_type": tunnelType, "host": c.host}
	if err := c.call(ctx, pluginTarget("1.4"), "tunnel_sync", args, 0, &r); err != nil {
		return nil, err
	}
	return r.Tunnels, nil
}

// NetworkDetails is the API network dict get_network_details returns; Raw keeps every key.
type NetworkDetails struct {
	ID              string `json:"id"`
	MTU             int    `json:"mtu"`
	NetworkType     string `json:"provider:network_type"`
	PhysicalNetwork string `json:"provider:physical_network"`
	SegmentationID  *int   `json:"provider:segmentation_id"`
	Segments        []struct {
		NetworkType     string `json:"provider:network_type"`
		PhysicalNetwork string `json:"provider:physical_network"`
		SegmentationID  *int   `json:"provider:segmentation_id"`
	} `json:"segments,omitempty"`
	AdminStateUp bool            `json:"admin_state_up"`
	Status       string          `json:"status"`
	Raw          json.RawMessage `json:"-"`
}

// GetNetworkDetails fetches the API dict of a network (q-plugin 1.6).
func (c *Client) GetNetworkDetails(ctx context.Context, networkID string) (NetworkDetails, error) {
	var raw json.RawMessage
	args := map[string]any{"network": networkID, "agent_id": AgentID(c.host), "host": c.host}
	if err := c.call(ctx, pluginTarget("1.6"), "get_network_details", args, 0, &raw); err != nil {
		return NetworkDetails{}, err
	}
	var d NetworkDetails
	if err := json.Unmarshal(raw, &d); err != nil {
		return d, fmt.Errorf("%w: get_network_details: %v", ErrBadReply, err)
	}
	d.Raw = raw
	return d, nil
}
