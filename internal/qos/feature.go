package qos

import (
	"context"
	"fmt"
	"maps"
	"net"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/ovsagent/ovsagent/internal/feature"
	"github.com/ovsagent/ovsagent/internal/neutron"
	of "github.com/ovsagent/ovsagent/internal/openflow"
	"github.com/ovsagent/ovsagent/internal/ovsdb"
)

// The QoS extension on the agent's feature seam (internal/feature): the Manager fed
// by the port lifecycle and the server's objects, its flows a FlowSource, the
// Runtime's I/O in Sync.

var registerOnce sync.Once

// Register makes the cache hold QosPolicy objects and the agent consume their push
// topic (neutron-vo-QosPolicy-1.10). Only an agent with the qos extension calls it,
// as the reference subscribes to that topic only with the extension loaded; it must
// run before the cache is built (neutron.NewCache makes a map per registered type).
// Idempotent.
func Register() {
	registerOnce.Do(func() {
		neutron.RegisterType(neutron.TypeQosPolicy, neutron.ResourceVersions[neutron.TypeQosPolicy],
			func() neutron.DecodableResource { return &neutron.QosPolicy{} })
	})
}

// ownerPhysical owns the minimum-bandwidth set_queue flows of the physical bridges.
const ownerPhysical = OwnerKind + ":physical"

// Deps are the edges the feature talks through. Meters and Rows may be nil in a
// dry run (explain, takeover --dry-run): the feature then changes nothing.
type Deps struct {
	Options Options
	// Meters is br-int's OpenFlow connection, looked up when needed (the bridges
	// connect after the features are built).
	Meters func() (Meters, error)
	Rows   Rows
	// Ports reads a bridge's ports (ovsdb.Client.BridgePorts): meter ids kept in
	// other_config at the first Sync, the physical NICs for minimum bandwidth.
	Ports func(ctx context.Context, bridge string) ([]ovsdb.PortInfo, error)
	// Features is the switch's meter support (openflow.Conn.MeterFeatures).
	Features func(ctx context.Context) (of.MeterFeatures, error)
	Pull     Puller
	// Port and Network read the cached objects for a port's policy ids.
	Port    func(id string) *neutron.Port
	Network func(id string) *neutron.Network
	// MinBandwidthQoSID is the agent's minimum-bandwidth QoS id (a uuid per run,
	// as the reference's _min_bw_qos_id).
	MinBandwidthQoSID string
}

// Feature is the qos extension.
type Feature struct {
	d     Deps
	h     feature.Host
	m     *Manager
	rt    *Runtime
	ports map[string]feature.Port
	ready bool // meter features and the ids kept on the host read
}

// New builds the extension.
func New(d Deps) *Feature {
	f := &Feature{d: d, ports: map[string]feature.Port{}}
	f.m = NewManager(d.Options, 0, nil)
	f.rt = &Runtime{M: f.m, Rows: d.Rows, Pull: d.Pull, MinBandwidthQoSID: d.MinBandwidthQoSID}
	return f
}

func (f *Feature) Name() string                  { return "qos" }
func (f *Feature) Attach(h feature.Host)         { f.h = h }
func (f *Feature) Kinds() []string               { return []string{OwnerKind} }
func (f *Feature) Extension() string             { return "qos" }
func (f *Feature) Configurations(map[string]any) {}

// Resources: pushed policies, and ports and networks whose policy ids change.
func (f *Feature) Resources() []string {
	return []string{neutron.TypeQosPolicy, neutron.TypePort, neutron.TypeNetwork}
}

// Owners implements feature.FlowSource.
func (f *Feature) Owners() []string {
	out := f.m.Owners()
	if len(f.m.MinBandwidthQueues()) > 0 {
		out = append(out, ownerPhysical)
	}
	sort.Strings(out)
	return out
}

// Flows implements feature.FlowSource: br-int flows per port, the base flow, and
// the physical bridges' minimum-bandwidth flows.
func (f *Feature) Flows(owners []string) (map[string]map[string][]of.Flow, map[string]error) {
	layout := f.h.Layout()
	out := map[string]map[string][]of.Flow{}
	var rest []string
	for _, o := range owners {
		if o != ownerPhysical {
			rest = append(rest, o)
			continue
		}
		var nums []uint32
		for _, q := range f.m.MinBandwidthQueues() {
			nums = append(nums, q.QueueNum)
		}
		byBridge := map[string][]of.Flow{}
		for _, pb := range layout.Physical {
			if len(nums) > 0 && pb.PhyOFPort != 0 {
				byBridge[pb.Bridge] = PhysicalFlows([]uint32{pb.PhyOFPort}, nums)
			}
		}
		out[o] = byBridge
	}
	flows, errs := f.m.Flows(rest)
	for o, fs := range flows {
		out[o] = map[string][]of.Flow{layout.Integration: fs}
	}
	return out, errs
}

// PortWired implements feature.PortHandler: a bound port gets its policy (admin down
// included, as the reference's handle_port); a dead one has none.
func (f *Feature) PortWired(p feature.Port) {
	f.ports[p.ID] = p
	f.setPort(p)
}

// PortRemoved implements feature.PortHandler.
func (f *Feature) PortRemoved(id string) {
	delete(f.ports, id)
	f.touch(f.m.RemovePort(id))
}

func (f *Feature) setPort(p feature.Port) {
	if p.Wiring == feature.WiredDead {
		f.touch(f.m.RemovePort(p.ID))
		return
	}
	f.touch(f.m.SetPort(f.qosPort(p)))
}

func (f *Feature) qosPort(p feature.Port) Port {
	mac, _ := net.ParseMAC(p.MAC)
	q := Port{ID: p.ID, Name: p.Name, MAC: mac, OFPort: p.OFPort, DeviceOwner: p.DeviceOwner,
		PhysicalNetwork: p.PhysicalNetwork}
	if p.Wiring == feature.WiredUp {
		q.LocalVLAN = p.LocalVLAN
	}
	if f.d.Port != nil {
		if np := f.d.Port(p.ID); np != nil {
			q.PolicyID = np.QosPolicyID
		}
	}
	if f.d.Network != nil && p.NetworkID != "" {
		if n := f.d.Network(p.NetworkID); n != nil {
			q.NetworkPolicyID = n.QosPolicyID
		}
	}
	return q
}

// ResourceChanged implements feature.ResourceHandler.
func (f *Feature) ResourceChanged(r feature.Resource) {
	switch r.Type {
	case neutron.TypeQosPolicy:
		if r.Deleted {
			f.touch(f.m.DeletePolicy(r.ID))
			return
		}
		if pol, ok := r.New.(*neutron.QosPolicy); ok {
			f.touch(f.m.SetPolicy(pol))
		}
	case neutron.TypePort:
		if p, ok := f.ports[r.ID]; ok {
			f.setPort(p)
		}
	case neutron.TypeNetwork:
		for _, id := range slices.Sorted(maps.Keys(f.ports)) {
			if p := f.ports[id]; p.NetworkID == r.ID {
				f.setPort(p)
			}
		}
	}
}

// Sync implements feature.Syncer: the first time, the switch's meter support and the
// meter ids the host keeps (ours or the reference's); then the Runtime.
func (f *Feature) Sync(ctx context.Context) error {
	if f.d.Rows == nil || f.d.Meters == nil {
		return nil // dry run
	}
	meters, err := f.d.Meters()
	if err != nil {
		return fmt.Errorf("qos: br-int: %w", err)
	}
	f.rt.Meters = meters
	if !f.ready {
		if err := f.start(ctx); err != nil {
			return err
		}
	}
	f.rt.PhysicalNICs = f.physicalNICs
	dirty, err := f.rt.Sync(ctx)
	f.touch(dirty)
	return err
}

func (f *Feature) start(ctx context.Context) error {
	feat, err := f.d.Features(ctx)
	if err != nil {
		return fmt.Errorf("qos: meter features: %w", err)
	}
	held := map[string]uint32{}
	ports, err := f.d.Ports(ctx, f.h.Layout().Integration)
	if err != nil {
		return fmt.Errorf("qos: read meter ids: %w", err)
	}
	for _, p := range ports {
		for k, v := range ParseMeterIDs(p.OtherConfig) {
			held[k] = v
		}
	}
	max := feat.MaxMeter
	if !feat.Supported() {
		// the reference skips meters then; no id can be given
		max = 0
		f.h.Log().Warn("qos: the switch has no meters: packet rate limits (and bandwidth limits with qos_meter_bandwidth) are not applied",
			"features", fmt.Sprintf("%+v", feat))
	}
	old := f.m
	f.m = NewManager(f.d.Options, max, held)
	for _, id := range slices.Sorted(maps.Keys(old.policies)) {
		f.m.policies[id] = old.policies[id]
	}
	f.rt.M = f.m
	for _, id := range slices.Sorted(maps.Keys(f.ports)) {
		f.setPort(f.ports[id])
	}
	f.ready = true
	return nil
}

func (f *Feature) physicalNICs(ctx context.Context) ([]string, error) {
	var out []string
	for _, pb := range f.h.Layout().Physical {
		ports, err := f.d.Ports(ctx, pb.Bridge)
		if err != nil {
			return nil, err
		}
		for _, p := range ports {
			if p.Type == "" {
				out = append(out, p.Name)
			}
		}
	}
	return out, nil
}

// Resync implements feature.Resyncer: rows are written again at the next Sync.
func (f *Feature) Resync(string) { f.rt.Forget() }

// PortOwners implements feature.Explainer.
func (f *Feature) PortOwners(p feature.Port) []string { return []string{PortOwner(p.ID)} }

// Reason implements feature.Explainer.
func (f *Feature) Reason(owner, bridge string, table uint8) string {
	switch {
	case owner == OwnerBase:
		return "qos: every packet once through queue 0 (set_queue_for_ingress_bandwidth_limit)"
	case owner == ownerPhysical:
		return "qos: minimum-bandwidth queue of a port's traffic to the physical network"
	}
	id := strings.TrimPrefix(owner, OwnerKind+":")
	what := map[uint8]string{
		TableLocalSwitching:     "DSCP marking / minimum-bandwidth pkt_mark",
		TablePacketRateLimit:    "packet rate limit (meter)",
		TableBandwidthRateLimit: "bandwidth limit (meter)",
	}[table]
	p, _ := f.m.ports[id]
	return fmt.Sprintf("qos: %s of port %s, policy %s", what, id, p.PolicyIDToApply())
}

// Unrebuilt implements feature.Takeover: the reference's QoS state is adopted, not
// swept (meter ids from Port other_config, QoS/Queue rows found by external_ids,
// flows replaced in place).
func (f *Feature) Unrebuilt(feature.HostState) []string { return nil }

func (f *Feature) touch(owners []string) {
	if len(owners) > 0 && f.h != nil {
		f.h.Touch(owners...)
	}
}

var (
	_ feature.FlowSource      = (*Feature)(nil)
	_ feature.PortHandler     = (*Feature)(nil)
	_ feature.ResourceHandler = (*Feature)(nil)
	_ feature.Syncer          = (*Feature)(nil)
	_ feature.Resyncer        = (*Feature)(nil)
	_ feature.Explainer       = (*Feature)(nil)
	_ feature.Takeover        = (*Feature)(nil)
	_ feature.Reporter        = (*Feature)(nil)
	_ feature.Attacher        = (*Feature)(nil)
)
