package trunk

import (
	"context"

	"github.com/ovsagent/ovsagent/internal/feature"
	"github.com/ovsagent/ovsagent/internal/ovsdb"
)

// FeatureName is the trunk handler's name among the agent's features; its presence
// makes the agent accept trunk bridges at a start or takeover (internal/agent
// UnrebuiltState), since the handler rewires them as the reference does at its start.
const FeatureName = "trunk"

// Feature is the trunk handler registered with the agent (internal/feature). It owns no
// flows: the patch ports it creates on br-int carry the Neutron port's iface-id and
// attached-mac, so the agent wires them as any VIF (local VLAN, flows, ACTIVE), which
// is what the reference's OVS agent does with them too.
type Feature struct {
	Handler *Handler
	// Watch is the source of trunk bridge snapshots (ovsdb.Client.WatchBridgePrefix).
	Watch func(ctx context.Context, prefix string) <-chan []ovsdb.BridgeSnapshot
}

var (
	_ feature.Feature  = (*Feature)(nil)
	_ feature.Runner   = (*Feature)(nil)
	_ feature.Takeover = (*Feature)(nil)
)

// Name implements feature.Feature.
func (f *Feature) Name() string { return FeatureName }

// Run implements feature.Runner: the handler follows the trunk bridges until ctx ends.
// A Feature without a handler (the dry-run subcommands) does nothing.
func (f *Feature) Run(ctx context.Context) {
	if f.Handler == nil || f.Watch == nil {
		return
	}
	f.Handler.Run(ctx, f.Watch(ctx, BridgePrefix))
}

// Unrebuilt implements feature.Takeover: trunk bridges are rebuilt (rewired against the
// server's trunks, or disposed of without a VM), so nothing is refused.
func (f *Feature) Unrebuilt(feature.HostState) []string { return nil }
