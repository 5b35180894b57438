package qos

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sort"

	"github.com/ovsagent/ovsagent/internal/neutron"
	of "github.com/ovsagent/ovsagent/internal/openflow"
	"github.com/ovsagent/ovsagent/internal/ovsdb"
)

// Rows is the part of the OVSDB client QoS writes (ovsdb.Client implements it).
type Rows interface {
	EnsureQoS(ctx context.Context, spec ovsdb.QoSSpec, ports ...string) error
	DeleteQoS(ctx context.Context, id, typ string) error
	SetIngressPolicing(ctx context.Context, iface string, rate, burst int64) error
	SetPortOtherConfig(ctx context.Context, port string, set map[string]string, del ...string) error
}

// Puller fetches one policy by id (neutron.Client.Pull); nil when the server has none.
type Puller func(ctx context.Context, id string) (*neutron.QosPolicy, error)

// Runtime does the I/O the Manager's decisions need, once per agent batch (Sync):
// pull the policies ports name and nobody sent, write the OVSDB state of each port
// whose plan changed, keep br-int's meters equal to the plans. The flows themselves
// are the Manager's (Flows) and go through the agent's reconciler.
type Runtime struct {
	M      *Manager
	Meters Meters
	Rows   Rows
	Pull   Puller
	// MinBandwidth, when set, places the minimum-bandwidth queues: the QoS id the
	// agent made at start (ovs_lib's _min_bw_qos_id) and the physical bridges'
	// NIC ports (get_bridge_ports(''): Interface type "") it goes on.
	MinBandwidthQoSID string
	PhysicalNICs      func(ctx context.Context) ([]string, error)

	// written is the OVSDB state last written per port name; a port absent has
	// nothing of ours (or we do not know: it is written at its first Sync).
	written map[string]portRows
	// minBWWritten and minBWNICs are the minimum-bandwidth state last written (nil:
	// not known yet).
	minBWWritten []Queue
	minBWNICs    []string
}

type portRows struct {
	policing Policing
	ingress  *Queue
	meterIDs map[string]uint32
}

func (a portRows) equal(b portRows) bool {
	if a.policing != b.policing || (a.ingress == nil) != (b.ingress == nil) {
		return false
	}
	if a.ingress != nil && !maps.Equal(a.ingress.OtherConfig, b.ingress.OtherConfig) {
		return false
	}
	return maps.Equal(a.meterIDs, b.meterIDs)
}

// Sync pulls missing policies (returning the owners whose flows changed), then
// writes rows and meters. Errors are joined; what succeeded stays done, and the next
// Sync retries the rest.
func (r *Runtime) Sync(ctx context.Context) (dirty []string, err error) {
	var errs []error
	for _, id := range r.M.Missing() {
		pol, perr := r.Pull(ctx, id)
		switch {
		case perr != nil:
			errs = append(errs, fmt.Errorf("qos: pull policy %s: %w", id, perr))
		case pol == nil:
			dirty = append(dirty, r.M.PolicyAbsent(id)...)
		default:
			dirty = append(dirty, r.M.SetPolicy(pol)...)
		}
	}
	if err := r.syncRows(ctx); err != nil {
		errs = append(errs, err)
	}
	if err := r.syncMinBandwidth(ctx); err != nil {
		errs = append(errs, err)
	}
	want, merr := r.M.Meters()
	if merr != nil {
		errs = append(errs, merr)
	} else if err := SyncMeters(ctx, keepMeters{r.Meters, r.M.Keep()}, want, func(context.Context) error { return nil }); err != nil {
		errs = append(errs, err)
	}
	sort.Strings(dirty)
	return dirty, errors.Join(errs...)
}

// Forget drops what is remembered as written (an OVSDB reconnect, an ovs-vswitchd
// restart): the next Sync writes every port again.
func (r *Runtime) Forget() { r.written, r.minBWWritten, r.minBWNICs = nil, nil, nil }

func (r *Runtime) syncRows(ctx context.Context) error {
	if r.written == nil {
		r.written = map[string]portRows{}
	}
	var errs []error
	seen := map[string]bool{}
	for _, id := range slices.Sorted(maps.Keys(r.M.ports)) {
		p := r.M.ports[id]
		plan, ok := r.M.plans[id]
		if !ok {
			continue // policy being pulled: leave what is there
		}
		seen[p.Name] = true
		want := portRows{ingress: plan.IngressQueue, meterIDs: r.M.MeterIDs(id)}
		if plan.EgressPolicing != nil {
			want.policing = *plan.EgressPolicing
		}
		if have, ok := r.written[p.Name]; ok && have.equal(want) {
			continue
		}
		if err := r.writePort(ctx, p, want, r.written[p.Name]); err != nil {
			errs = append(errs, err)
			continue
		}
		r.written[p.Name] = want
	}
	// ports gone: their rows go (the Port row itself may be gone with them)
	for name, have := range r.written {
		if seen[name] {
			continue
		}
		if have.ingress != nil {
			if err := r.Rows.DeleteQoS(ctx, name, neutron.RuleBandwidthLimit); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		delete(r.written, name)
	}
	return errors.Join(errs...)
}

// syncMinBandwidth keeps the agent's minimum-bandwidth QoS on the physical NICs
// holding one queue per port that has the rule; none left, it goes.
func (r *Runtime) syncMinBandwidth(ctx context.Context) error {
	if r.PhysicalNICs == nil || r.MinBandwidthQoSID == "" {
		return nil
	}
	qs := r.M.MinBandwidthQueues()
	if len(qs) == 0 {
		if r.minBWWritten == nil || len(r.minBWWritten) > 0 {
			if err := r.Rows.DeleteQoS(ctx, r.MinBandwidthQoSID, neutron.RuleMinimumBandwidth); err != nil {
				return err
			}
		}
		r.minBWWritten = []Queue{}
		return nil
	}
	nics, err := r.PhysicalNICs(ctx)
	if err != nil {
		return fmt.Errorf("qos: physical bridges' ports: %w", err)
	}
	sort.Strings(nics)
	if reflect.DeepEqual(qs, r.minBWWritten) && reflect.DeepEqual(nics, r.minBWNICs) {
		return nil
	}
	if err := r.Rows.EnsureQoS(ctx, MinBandwidthQoSSpec(r.MinBandwidthQoSID, qs), nics...); err != nil {
		return err
	}
	r.minBWWritten, r.minBWNICs = qs, nics
	return nil
}

func (r *Runtime) writePort(ctx context.Context, p Port, want, had portRows) error {
	if err := r.Rows.SetIngressPolicing(ctx, p.Name, want.policing.Rate, want.policing.Burst); err != nil {
		return fmt.Errorf("qos: port %s: %w", p.ID, err)
	}
	var err error
	if want.ingress != nil {
		err = r.Rows.EnsureQoS(ctx, IngressQoSSpec(p.Name, want.ingress), p.Name)
	} else {
		err = r.Rows.DeleteQoS(ctx, p.Name, neutron.RuleBandwidthLimit)
	}
	if err != nil {
		return fmt.Errorf("qos: port %s: %w", p.ID, err)
	}
	// meter ids where the reference keeps them, so that either agent finds the other's
	set := map[string]string{}
	for k, v := range want.meterIDs {
		set[k] = fmt.Sprint(v)
	}
	var del []string
	for _, kind := range []string{KindBPS, KindPPS} {
		for _, dir := range []string{neutron.DirectionEgress, neutron.DirectionIngress} {
			if k := MeterKey(kind, p.ID, dir); want.meterIDs[k] == 0 {
				del = append(del, k)
			}
		}
	}
	if err := r.Rows.SetPortOtherConfig(ctx, p.Name, set, del...); err != nil {
		return fmt.Errorf("qos: port %s: %w", p.ID, err)
	}
	return nil
}

// keepMeters is a bridge's meters where the ids in keep are not deleted
// (Manager.Keep: a held meter whose port is not planned yet).
type keepMeters struct {
	Meters
	keep map[uint32]bool
}

func (k keepMeters) MeterMods(ctx context.Context, mods []of.MeterMod) error {
	out := mods[:0:0]
	for _, m := range mods {
		if m.Command == of.MeterDelete && k.keep[m.Meter.ID] {
			continue
		}
		out = append(out, m)
	}
	return k.Meters.MeterMods(ctx, out)
}

var _ Meters = (*of.Conn)(nil)
var _ Rows = (*ovsdb.Client)(nil)
