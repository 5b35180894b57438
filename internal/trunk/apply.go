package trunk

import (
	"context"
	"errors"
	"fmt"

	"github.com/ovsagent/ovsagent/internal/ovsdb"
)

// Switch is the part of internal/ovsdb's Client a plan needs.
type Switch interface {
	EnsureTrunkPatches(ctx context.Context, ps ...ovsdb.TrunkPatch) error
	DeleteBridgePorts(ctx context.Context, refs ...ovsdb.BridgePort) error
	MergeInterfaceExternalIDs(ctx context.Context, iface string, set map[string]string) error
	DeleteBridge(ctx context.Context, bridge string, also ...ovsdb.BridgePort) error
}

var _ Switch = (*ovsdb.Client)(nil)

func toPatches(ps []Patch) []ovsdb.TrunkPatch {
	out := make([]ovsdb.TrunkPatch, len(ps))
	for i, p := range ps {
		out[i] = ovsdb.TrunkPatch{Bridge: p.Bridge, Name: p.Name, Peer: p.Peer, ExternalIDs: p.ExternalIDs, AccessTag: p.Access}
	}
	return out
}

func toRefs(rs []PortRef) []ovsdb.BridgePort {
	out := make([]ovsdb.BridgePort, len(rs))
	for i, r := range rs {
		out[i] = ovsdb.BridgePort{Bridge: r.Bridge, Name: r.Name}
	}
	return out
}

// Apply carries out a plan in the reference's order and transactions: the parent's
// patch pair (nothing else when it fails), one transaction per subport removed, then per
// subport added, the metadata, then the removed trunk's or disposed bridge's ports. The
// Outcome says what failed (Status turns it into the trunk status); err joins the
// errors, for the log.
func Apply(ctx context.Context, sw Switch, p Plan) (Outcome, error) {
	o := Outcome{Failed: map[string]bool{}}
	var errs []error
	if len(p.Parent) > 0 {
		if err := sw.EnsureTrunkPatches(ctx, toPatches(p.Parent)...); err != nil {
			o.ParentFailed = true
			return o, fmt.Errorf("trunk: parent patch ports: %w", err)
		}
	}
	for _, s := range p.Remove {
		if err := sw.DeleteBridgePorts(ctx, toRefs(s.Del)...); err != nil {
			o.Failed[s.PortID] = true
			errs = append(errs, fmt.Errorf("trunk: remove subport %s: %w", s.PortID, err))
		}
	}
	for _, s := range p.Add {
		if s.Invalid != "" {
			errs = append(errs, fmt.Errorf("trunk: subport %s not wired: %s", s.PortID, s.Invalid))
			continue
		}
		if err := sw.EnsureTrunkPatches(ctx, toPatches(s.Add)...); err != nil {
			o.Failed[s.PortID] = true
			errs = append(errs, fmt.Errorf("trunk: add subport %s: %w", s.PortID, err))
		}
	}
	if md := p.Metadata; md != nil {
		if err := sw.MergeInterfaceExternalIDs(ctx, md.Iface, md.ExternalIDs()); err != nil {
			o.MetadataFailed = true
			errs = append(errs, fmt.Errorf("trunk: metadata on %s: %w", md.Iface, err))
		}
	}
	switch {
	case p.Dispose != "":
		if err := sw.DeleteBridge(ctx, p.Dispose, toRefs(p.DelPorts)...); err != nil {
			errs = append(errs, fmt.Errorf("trunk: dispose of %s: %w", p.Dispose, err))
		}
	case len(p.DelPorts) > 0:
		if err := sw.DeleteBridgePorts(ctx, toRefs(p.DelPorts)...); err != nil {
			errs = append(errs, fmt.Errorf("trunk: remove trunk ports: %w", err))
		}
	}
	return o, errors.Join(errs...)
}
