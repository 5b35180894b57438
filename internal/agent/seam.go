package agent

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/ovsagent/ovsagent/internal/feature"
	"github.com/ovsagent/ovsagent/internal/openflow"
	"github.com/ovsagent/ovsagent/internal/pipeline"
)

// The loop's side of the feature seam (internal/feature): registration,
// the port and server-object hooks, the per-batch Sync with back-off.

// registerFeatures registers the pipeline and its overlay, then the given
// features (the firewall and the extensions), and attaches the host to each
// feature that asks for it. An error (two sources claiming one owner kind)
// is returned by Run.
func (a *Agent) registerFeatures(ext []feature.Feature) {
	builtin := []feature.Feature{pipeline.Source{State: a.ps}, a.overlay}
	all := append(builtin, ext...)
	set, err := feature.NewSet(all...)
	if err != nil {
		a.featErr = fmt.Errorf("agent: %w", err)
		set, _ = feature.NewSet(builtin...)
	}
	a.features = set
	a.resourceTypes = map[string]bool{}
	for _, f := range set.All() {
		if at, ok := f.(feature.Attacher); ok {
			at.Attach(host{a: a, name: f.Name()})
		}
		if rh, ok := f.(feature.ResourceHandler); ok {
			for _, t := range rh.Resources() {
				a.resourceTypes[t] = true
			}
		}
	}
}

// ResourceTypes are the OVO types the registered features consume (the
// resource cache must hold them and the agent consume their push topics).
func (a *Agent) ResourceTypes() []string { return slices.Sorted(maps.Keys(a.resourceTypes)) }

// ResourceChanged is a change of a server object some feature consumes,
// handed to the loop (NotifyFromCache sends it).
type ResourceChanged struct{ feature.Resource }

func (ResourceChanged) isEvent() {}

// featureEvent is a feature's own event (feature.Host.Notify).
type featureEvent struct {
	name string
	data any
}

func (featureEvent) isEvent() {}

// onFeatureEvent hands the event to its feature.
func (a *Agent) onFeatureEvent(e featureEvent) {
	for _, f := range a.features.All() {
		if f.Name() == e.name {
			if h, ok := f.(feature.EventHandler); ok {
				h.HandleEvent(e.data)
			}
			return
		}
	}
}

// onResourceChanged delivers the change to each feature consuming its type.
func (a *Agent) onResourceChanged(r feature.Resource) {
	for _, f := range a.features.All() {
		rh, ok := f.(feature.ResourceHandler)
		if !ok {
			continue
		}
		for _, t := range rh.Resources() {
			if t == r.Type {
				rh.ResourceChanged(r)
				break
			}
		}
	}
}

// portWired tells the features a port's wiring was decided.
func (a *Agent) portWired(p *portRec) {
	var fp *feature.Port
	for _, f := range a.features.All() {
		if h, ok := f.(feature.PortHandler); ok {
			if fp == nil {
				v := a.featurePort(p)
				fp = &v
			}
			h.PortWired(*fp)
		}
	}
}

// portRemoved tells the features a port left.
func (a *Agent) portRemoved(id string) {
	for _, f := range a.features.All() {
		if h, ok := f.(feature.PortHandler); ok {
			h.PortRemoved(id)
		}
	}
}

// resyncFeatures tells the features of a full resync.
func (a *Agent) resyncFeatures(reason string) {
	for _, f := range a.features.All() {
		if r, ok := f.(feature.Resyncer); ok {
			r.Resync(reason)
		}
	}
}

// syncFeatures runs each feature's Sync that is due; a failure is logged
// and retried after a back-off, the batch goes on.
func (a *Agent) syncFeatures(ctx context.Context) {
	now := a.now()
	for _, f := range a.features.All() {
		s, ok := f.(feature.Syncer)
		if !ok {
			continue
		}
		name := f.Name()
		r := a.featRetry[name]
		if r != nil && r.at.After(now) {
			continue
		}
		if err := s.Sync(ctx); err != nil {
			if r == nil {
				r = &retry{}
				a.featRetry[name] = r
			}
			wait := r.fail(now, a.backoff)
			a.log.Warn("agent: feature sync failed; retrying", "feature", name, "err", err, "in", wait)
			continue
		}
		delete(a.featRetry, name)
	}
}

// adoptBridges has the features read their OVSDB rows on the bridges just
// set up (feature.BridgeAdopter).
func (a *Agent) adoptBridges(ctx context.Context, restarted bool) {
	for _, f := range a.features.All() {
		if b, ok := f.(feature.BridgeAdopter); ok {
			b.AdoptBridges(ctx, restarted)
		}
	}
}

// prefetch sends the features' server calls that overlap the details
// fetch; the returned function applies their answers (feature.Prefetcher).
func (a *Agent) prefetch(ctx context.Context) (finish func()) {
	var fins []func()
	for _, f := range a.features.All() {
		if p, ok := f.(feature.Prefetcher); ok {
			fins = append(fins, p.Prefetch(ctx))
		}
	}
	return func() {
		for _, fin := range fins {
			fin()
		}
	}
}

// featuresComplete: no feature's part of the dataplane still waits on the
// server (feature.Completer).
func (a *Agent) featuresComplete() bool {
	for _, f := range a.features.All() {
		if c, ok := f.(feature.Completer); ok && !c.Complete() {
			return false
		}
	}
	return true
}

// featuresHoldSweep: some feature keeps br's stale flows for now.
func (a *Agent) featuresHoldSweep(br string) bool {
	for _, f := range a.features.All() {
		if c, ok := f.(feature.Completer); ok && c.HoldSweep(br) {
			return true
		}
	}
	return false
}

// refreshNetworks are the networks some feature wants refreshed by the
// next update_device_list (feature.Refresher), sorted.
func (a *Agent) refreshNetworks() []string {
	var out []string
	for _, f := range a.features.All() {
		if r, ok := f.(feature.Refresher); ok {
			out = append(out, r.RefreshNetworks()...)
		}
	}
	if len(out) > 1 {
		slices.Sort(out)
		out = slices.Compact(out)
	}
	return out
}

// refreshReplied tells the refreshers a call carrying these networks'
// refresh succeeded.
func (a *Agent) refreshReplied(nets []string, sent, replied time.Time) {
	for _, f := range a.features.All() {
		if r, ok := f.(feature.Refresher); ok {
			r.RefreshReplied(nets, sent, replied)
		}
	}
}

// portOwners are the owners whose flows exist because of the port, as the
// features say (the pipeline's and the firewall's first).
func (a *Agent) portOwners(p *portRec) []string {
	fp := a.featurePort(p)
	var out []string
	for _, f := range a.features.All() {
		if e, ok := f.(feature.Explainer); ok {
			out = append(out, e.PortOwners(fp)...)
		}
	}
	return out
}

// reason says what a flow of owner is for, as its feature says.
func (a *Agent) reason(owner, bridge string, table uint8) string {
	if src, ok := a.features.SourceOf(owner); ok {
		if e, ok := src.(feature.Explainer); ok {
			return e.Reason(owner, bridge, table)
		}
	}
	return owner + ": " + a.tableName(bridge, table)
}

// securityGroupsChanged tells the features the server changed these
// security groups' rules or members.
func (a *Agent) securityGroupsChanged(ids []string) {
	for _, f := range a.features.All() {
		if h, ok := f.(feature.SecurityGroupHandler); ok {
			h.SecurityGroupsChanged(ids)
		}
	}
}

// featuresWaiting: some feature still waits on the server (feature.Waiter).
func (a *Agent) featuresWaiting() bool {
	for _, f := range a.features.All() {
		if w, ok := f.(feature.Waiter); ok && w.Waiting() {
			return true
		}
	}
	return false
}

// flowsApplied tells the features which owners' flows went into bridge.
func (a *Agent) flowsApplied(bridge string, set map[string][]openflow.Flow) {
	if len(set) == 0 {
		return
	}
	var owners []string
	for _, f := range a.features.All() {
		o, ok := f.(feature.FlowObserver)
		if !ok {
			continue
		}
		if owners == nil {
			owners = slices.Sorted(maps.Keys(set))
		}
		o.FlowsApplied(bridge, owners)
	}
}

// sweptFeatures tells the features the stale flows are gone.
func (a *Agent) sweptFeatures() {
	for _, f := range a.features.All() {
		if o, ok := f.(feature.FlowObserver); ok {
			o.Swept()
		}
	}
}

// installedFlows is implemented by Flows edges that can list what a bridge
// held when they adopted it.
type installedFlows interface {
	InstalledFlows(bridge string) []openflow.Flow
}

// adoptFeatures tells the features what the bridges held at start.
func (a *Agent) adoptFeatures() {
	var installed func(string) []openflow.Flow
	if src, ok := a.d.Flows.(installedFlows); ok {
		installed = src.InstalledFlows
	}
	a.adoptInstalled(installed)
}

func (a *Agent) adoptInstalled(installed func(bridge string) []openflow.Flow) {
	for _, f := range a.features.All() {
		if ad, ok := f.(feature.Adopter); ok {
			ad.Adopt(installed)
		}
	}
}
