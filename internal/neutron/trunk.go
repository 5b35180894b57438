package neutron

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
)

// Trunks (vlan-aware VMs). The reference OVS agent always runs the trunk handler
// (neutron/services/trunk/drivers/openvswitch/agent): it consumes the Trunk and SubPort
// push topics, pulls a trunk by its parent port (get_trunk_details is a resources pull),
// and calls the trunk plugin's own RPC (topic "trunk", namespace "trunk", 1.0) to bind
// subports to its host and to report the trunk's status. Trunks are not kept in the
// resource Cache: the handler asks the server for a trunk when its bridge appears, as the
// reference does, and reacts to subport pushes only for the trunks it wires.

// Trunk resource types and the versions servers send (Zed and 2026.2 alike: Trunk 1.1,
// SubPort 1.0; the versions the agent reports in ReportedResourceVersions).
const (
	TypeTrunk   = "Trunk"
	TypeSubPort = "SubPort"

	TrunkVersion   = "1.1"
	SubPortVersion = "1.0"
)

// The trunk plugin's RPC target (neutron/services/trunk/rpc/constants.py, TrunkStub).
const (
	TopicTrunk        = "trunk"
	TrunkRPCNamespace = "trunk"
	TrunkRPCVersion   = "1.0"
)

// Trunk statuses (neutron_lib.services.trunk.constants).
const (
	TrunkActive   = "ACTIVE"
	TrunkDown     = "DOWN"
	TrunkBuild    = "BUILD"
	TrunkDegraded = "DEGRADED"
	TrunkError    = "ERROR"
)

// SegmentationVLAN is the only segmentation type the OVS trunk driver supports.
const SegmentationVLAN = "vlan"

// TrunkSubportOwner is the device_owner the server gives a bound subport.
const TrunkSubportOwner = "trunk:subport"

// TrunkPushTopic and SubPortPushTopic are the fanout topics the server pushes trunks and
// subports on (neutron-vo-<Type>-<version>).
func TrunkPushTopic() string   { return "neutron-vo-" + TypeTrunk + "-" + TrunkVersion }
func SubPortPushTopic() string { return "neutron-vo-" + TypeSubPort + "-" + SubPortVersion }

// SubPort is SubPort 1.0.
type SubPort struct {
	PortID           string `json:"port_id"`
	TrunkID          string `json:"trunk_id"`
	SegmentationType string `json:"segmentation_type"`
	SegmentationID   int    `json:"segmentation_id"`
}

// Trunk is Trunk 1.x (1.1: project_id; 1.0 said tenant_id).
type Trunk struct {
	ID           string    `json:"id"`
	ProjectID    string    `json:"project_id,omitempty"`
	Name         string    `json:"name,omitempty"`
	PortID       string    `json:"port_id"`
	Status       string    `json:"status,omitempty"`
	AdminStateUp bool      `json:"admin_state_up"`
	SubPorts     []SubPort `json:"sub_ports"`
}

type subPortWire SubPort

type trunkWire struct {
	ID           string            `json:"id"`
	ProjectID    string            `json:"project_id"`
	TenantID     string            `json:"tenant_id"`
	Name         string            `json:"name"`
	PortID       string            `json:"port_id"`
	Status       string            `json:"status"`
	AdminStateUp *bool             `json:"admin_state_up"`
	SubPorts     []vo[subPortWire] `json:"sub_ports"`
	// Standard attributes (revision_number, description, created_at, ...) are ignored.
}

func (s *subPortWire) check() error {
	if s.PortID == "" {
		return fmt.Errorf("ovo: SubPort without port_id")
	}
	return nil
}

// DecodeSubPort decodes one SubPort primitive.
func DecodeSubPort(b []byte) (SubPort, error) {
	var w vo[subPortWire]
	err := json.Unmarshal(b, &w)
	if w.Name == "" && err != nil {
		return SubPort{}, fmt.Errorf("ovo: %s: %w", TypeSubPort, err)
	}
	if cerr := w.check(TypeSubPort, "", SubPortVersion); cerr != nil {
		return SubPort{}, cerr
	}
	if err != nil {
		return SubPort{}, fmt.Errorf("ovo: %s %s: %w", TypeSubPort, w.Version, err)
	}
	if err := w.Data.check(); err != nil {
		return SubPort{}, err
	}
	return SubPort(w.Data), nil
}

// DecodeTrunk decodes one Trunk primitive. A trunk's subports carry its id (the server
// sets trunk_id on each); one without is given the trunk's.
func DecodeTrunk(b []byte) (Trunk, error) {
	var w vo[trunkWire]
	err := json.Unmarshal(b, &w)
	if w.Name == "" && err != nil {
		return Trunk{}, fmt.Errorf("ovo: %s: %w", TypeTrunk, err)
	}
	if cerr := w.check(TypeTrunk, "", TrunkVersion); cerr != nil {
		return Trunk{}, cerr
	}
	if err != nil {
		return Trunk{}, fmt.Errorf("ovo: %s %s: %w", TypeTrunk, w.Version, err)
	}
	d := &w.Data
	if d.ID == "" || d.PortID == "" {
		return Trunk{}, fmt.Errorf("ovo: Trunk without id or port_id")
	}
	t := Trunk{ID: d.ID, ProjectID: d.ProjectID, Name: d.Name, PortID: d.PortID, Status: d.Status, AdminStateUp: true}
	if t.ProjectID == "" {
		t.ProjectID = d.TenantID
	}
	if d.AdminStateUp != nil {
		t.AdminStateUp = *d.AdminStateUp
	}
	subs, err := convList(d.SubPorts, TypeSubPort, "", SubPortVersion, func(s *subPortWire) (SubPort, error) {
		if err := s.check(); err != nil {
			return SubPort{}, err
		}
		if s.TrunkID == "" {
			s.TrunkID = d.ID
		}
		return SubPort(*s), nil
	})
	if err != nil {
		return Trunk{}, fmt.Errorf("ovo: Trunk %s: %w", d.ID, err)
	}
	t.SubPorts = subs
	return t, nil
}

// Trunk push event types as the server sends them (events.CREATED / DELETED; UPDATED is
// accepted for completeness: the trunk plugin never pushes it).
const (
	TrunkEventCreated = "created"
	TrunkEventUpdated = "updated"
	TrunkEventDeleted = "deleted"
)

// TrunkPush is a decoded push on the Trunk topic.
type TrunkPush struct {
	EventType string
	Trunks    []Trunk
}

// SubPortPush is a decoded push on the SubPort topic. The server sends the subports of
// one trunk per push (subports_added / subports_deleted).
type SubPortPush struct {
	EventType string
	SubPorts  []SubPort
}

type pushArgs struct {
	ResourceList *[]json.RawMessage `json:"resource_list"`
	EventType    string             `json:"event_type"`
}

func decodePushArgs(args []byte) ([]json.RawMessage, string, error) {
	var a pushArgs
	if err := json.Unmarshal(args, &a); err != nil {
		return nil, "", fmt.Errorf("push: %w", err)
	}
	switch a.EventType {
	case TrunkEventCreated, TrunkEventUpdated, TrunkEventDeleted:
	default:
		return nil, "", fmt.Errorf("push: unknown event_type %q", a.EventType)
	}
	if a.ResourceList == nil {
		return nil, "", fmt.Errorf("push: missing resource_list")
	}
	return *a.ResourceList, a.EventType, nil
}

// DecodeTrunkPush decodes the args of a push on the Trunk topic. One bad element fails
// the message (the server sends one type per list).
func DecodeTrunkPush(args []byte) (*TrunkPush, error) {
	list, et, err := decodePushArgs(args)
	if err != nil {
		return nil, err
	}
	p := &TrunkPush{EventType: et, Trunks: make([]Trunk, 0, len(list))}
	for _, raw := range list {
		t, err := DecodeTrunk(raw)
		if err != nil {
			return nil, fmt.Errorf("push: %w", err)
		}
		p.Trunks = append(p.Trunks, t)
	}
	return p, nil
}

// DecodeSubPortPush decodes the args of a push on the SubPort topic. Subports without a
// trunk_id fail the message: the handler routes them by it.
func DecodeSubPortPush(args []byte) (*SubPortPush, error) {
	list, et, err := decodePushArgs(args)
	if err != nil {
		return nil, err
	}
	p := &SubPortPush{EventType: et, SubPorts: make([]SubPort, 0, len(list))}
	for _, raw := range list {
		s, err := DecodeSubPort(raw)
		if err != nil {
			return nil, fmt.Errorf("push: %w", err)
		}
		if s.TrunkID == "" {
			return nil, fmt.Errorf("push: SubPort %s without trunk_id", s.PortID)
		}
		p.SubPorts = append(p.SubPorts, s)
	}
	return p, nil
}

// TrunkHandler receives the trunk pushes. Methods run on the consumer goroutine and
// should hand off quickly. The reference's OVS handler ignores Trunk pushes (it learns
// trunks from OVSDB, the trunk bridge nova plugs) and acts on SubPort pushes.
type TrunkHandler interface {
	TrunkPushed(ctx context.Context, p *TrunkPush) error
	SubPortsPushed(ctx context.Context, p *SubPortPush) error
}

// TrunkSubscriptions are the two fanout push topics the reference's TrunkSkeleton
// consumes, with the push endpoint (ResourcesPushRpcCallback 1.1). onError, if set, sees
// pushes that do not decode.
func TrunkSubscriptions(h TrunkHandler, onError func(rtype string, err error)) []Subscription {
	fail := func(rtype string, err error) error {
		if onError != nil {
			onError(rtype, err)
		}
		return fmt.Errorf("%w: %s push: %v", ErrBadArgs, rtype, err)
	}
	trunkEP := Endpoint{Version: PushEndpointVersion, Methods: map[string]Handler{
		"push": func(ctx context.Context, req *Request) (any, error) {
			p, err := DecodeTrunkPush(req.Args)
			if err != nil {
				return nil, fail(TypeTrunk, err)
			}
			return nil, h.TrunkPushed(ctx, p)
		},
	}}
	subEP := Endpoint{Version: PushEndpointVersion, Methods: map[string]Handler{
		"push": func(ctx context.Context, req *Request) (any, error) {
			p, err := DecodeSubPortPush(req.Args)
			if err != nil {
				return nil, fail(TypeSubPort, err)
			}
			if len(p.SubPorts) == 0 {
				return nil, nil // the reference indexes subports[0]; an empty list means nothing
			}
			return nil, h.SubPortsPushed(ctx, p)
		},
	}}
	// The reference creates the SubPort consumer first.
	return []Subscription{
		{Topic: SubPortPushTopic(), Endpoints: []Endpoint{subEP}},
		{Topic: TrunkPushTopic(), Endpoints: []Endpoint{trunkEP}},
	}
}

// TrunkClient is the agent side of the trunk RPC (the reference's TrunkStub). Safe for
// concurrent use.
type TrunkClient struct{ c *Client }

// Trunk returns the trunk RPC client sharing c's transport, host and timeout.
func (c *Client) Trunk() *TrunkClient { return &TrunkClient{c: c} }

func trunkTarget() Target {
	return Target{Topic: TopicTrunk, Version: TrunkRPCVersion, Namespace: TrunkRPCNamespace}
}

// GetTrunkDetails pulls the trunk whose parent port is parentPortID (a resources pull on
// q-plugin 1.1, resource_type Trunk, the id being the parent port's: the server's
// provider looks the trunk up by port_id). nil when the port is no trunk's parent (the
// reference's ResourceNotFound).
func (t *TrunkClient) GetTrunkDetails(ctx context.Context, parentPortID string) (*Trunk, error) {
	args := map[string]any{"resource_type": TypeTrunk, "version": TrunkVersion, "resource_id": parentPortID}
	// Not through Client.call: a port that is no trunk's parent gets a reply with no
	// result at all (None), which is an answer, not a bad reply.
	raw, err := t.c.rpc.Call(ctx, pluginTarget("1.1"), "pull", args, t.c.Timeout)
	if err != nil {
		return nil, fmt.Errorf("neutron: get_trunk_details %s: %w", parentPortID, err)
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	tr, err := DecodeTrunk(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: get_trunk_details %s: %v", ErrBadReply, parentPortID, err)
	}
	if tr.PortID != parentPortID {
		return nil, fmt.Errorf("%w: get_trunk_details %s: trunk %s has parent %s", ErrBadReply, parentPortID, tr.ID, tr.PortID)
	}
	return &tr, nil
}

// UpdateTrunkStatus reports the outcome of wiring a trunk (trunk 1.0 update_trunk_status).
func (t *TrunkClient) UpdateTrunkStatus(ctx context.Context, trunkID, status string) error {
	switch status {
	case TrunkActive, TrunkDown, TrunkBuild, TrunkDegraded, TrunkError:
	default:
		return fmt.Errorf("neutron: update_trunk_status: unknown status %q", status)
	}
	return t.c.call(ctx, trunkTarget(), "update_trunk_status", map[string]any{"trunk_id": trunkID, "status": status}, 0, nil)
}

// BoundSubport is one port update_subport_bindings bound (the API port dict); the handler
// needs its MAC for the patch ports' attached-mac. Raw keeps every key.
type BoundSubport struct {
	ID         string          `json:"id"`
	MACAddress string          `json:"mac_address"`
	HostID     string          `json:"binding:host_id"`
	VIFType    string          `json:"binding:vif_type"`
	Raw        json.RawMessage `json:"-"`
}

// subPortDict is a SubPort as the reference sends it in update_subport_bindings: its
// RPC client has no object serializer, so oslo's JSON encoding turns the SubPort objects
// into plain dicts of their fields (jsonutils.to_primitive over the object's items()),
// which the server reads as dicts (s['trunk_id']). An OVO primitive fails there with a
// KeyError.
func subPortDict(s SubPort) map[string]any {
	return map[string]any{
		"port_id":           s.PortID,
		"trunk_id":          s.TrunkID,
		"segmentation_type": s.SegmentationType,
		"segmentation_id":   s.SegmentationID,
	}
}

// UpdateSubportBindings asks the server to bind subports to the parent port's host (trunk
// 1.0 update_subport_bindings). The answer is, per trunk id, the ports it bound; a
// subport whose binding failed is absent (and the server set the trunk DEGRADED or ERROR).
func (t *TrunkClient) UpdateSubportBindings(ctx context.Context, subports []SubPort) (map[string][]BoundSubport, error) {
	dicts := make([]map[string]any, len(subports))
	for i, s := range subports {
		if s.TrunkID == "" || s.PortID == "" {
			return nil, fmt.Errorf("neutron: update_subport_bindings: subport %q without trunk_id or port_id", s.PortID)
		}
		dicts[i] = subPortDict(s)
	}
	var raw map[string][]json.RawMessage
	if err := t.c.call(ctx, trunkTarget(), "update_subport_bindings", map[string]any{"subports": dicts}, 0, &raw); err != nil {
		return nil, err
	}
	out := make(map[string][]BoundSubport, len(raw))
	for trunkID, ports := range raw {
		for _, pr := range ports {
			var p BoundSubport
			if err := json.Unmarshal(pr, &p); err != nil {
				return nil, fmt.Errorf("%w: update_subport_bindings: trunk %s: %v", ErrBadReply, trunkID, err)
			}
			if p.ID == "" {
				return nil, fmt.Errorf("%w: update_subport_bindings: trunk %s: a port without id", ErrBadReply, trunkID)
			}
			p.MACAddress = strings.ToLower(p.MACAddress)
			p.Raw = pr
			out[trunkID] = append(out[trunkID], p)
		}
	}
	return out, nil
}
