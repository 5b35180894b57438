package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strings"

	"github.com/ovsagent/ovsagent/internal/feature"
	"github.com/ovsagent/ovsagent/internal/openflow"
)

// Explanation is everything the agent knows and owns for one port: the
// answer of `ovs-agent explain PORT-ID`.
type Explanation struct {
	PortID          string
	Name            string
	MAC             string
	OFPort          int32
	NetworkID       string
	NetworkType     string
	PhysicalNetwork string
	SegmentationID  *int
	LocalVLAN       int // DeadVLAN when dead; 0 when not wired
	Wiring          string
	ReportedUp      bool
	Source          string // "running agent" or "computed from OVSDB and the server"
	// Rejected lists the port's owners whose latest flows the switch
	// rejected: the port keeps their earlier flows (or, with none, the dead
	// VLAN) and is not reported up until the switch takes them.
	Rejected []string
	Flows    []ExplainedFlow
}

// ExplainedFlow is one flow with the reason it exists.
type ExplainedFlow struct {
	Bridge string
	Owner  string // the owner key the agent installs it under
	Reason string // what it is for: owner and feature (table) name
	Flow   openflow.Flow
}

// ErrUnknownPort: the port is not on br-int.
var ErrUnknownPort = errors.New("port not on the integration bridge")

type explainReq struct {
	portID string
	reply  chan explainResult
}

type explainResult struct {
	e   *Explanation
	err error
}

// Explain asks the running loop about a port (safe from any goroutine).
func (a *Agent) Explain(ctx context.Context, portID string) (*Explanation, error) {
	req := explainReq{portID: portID, reply: make(chan explainResult, 1)}
	select {
	case a.explain <- req:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case r := <-req.reply:
		return r.e, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (a *Agent) explainPort(id string) explainResult {
	p := a.ports[id]
	if p == nil || !p.present {
		return explainResult{err: fmt.Errorf("explain %s: %w", id, ErrUnknownPort)}
	}
	e := a.describe(p)
	e.Source = "running agent (flows as installed)"
	for _, o := range a.portOwners(p) {
		if a.rejected[o] != nil {
			e.Rejected = append(e.Rejected, o)
		}
	}
	if p.wired == wiredUp && a.heldDead(p.id) {
		e.LocalVLAN = DeadVLAN
	}
	for _, o := range a.portOwners(p) {
		for br := range a.applied {
			for _, f := range a.d.Flows.Desired(br, o) {
				e.Flows = append(e.Flows, ExplainedFlow{Bridge: br, Owner: o, Reason: a.reason(o, br, f.Table), Flow: f})
			}
		}
	}
	sortFlows(e.Flows)
	return explainResult{e: e}
}

func (a *Agent) describe(p *portRec) *Explanation {
	e := &Explanation{PortID: p.id, Name: p.vif.Name, MAC: p.vif.MAC, OFPort: p.vif.OFPort, Wiring: p.wired.String(), ReportedUp: p.upOnSrv}
	if p.dev != nil {
		e.NetworkID, e.NetworkType, e.PhysicalNetwork, e.SegmentationID = p.dev.NetworkID, p.dev.NetworkType, p.dev.PhysicalNetwork, p.dev.SegmentationID
	}
	switch p.wired {
	case wiredUp:
		if v, ok := a.maps.VLAN(p.net); ok {
			e.LocalVLAN = int(v)
		}
	case wiredAdminDown, wiredDead:
		e.LocalVLAN = DeadVLAN
	}
	return e
}

func sortFlows(fs []ExplainedFlow) {
	sort.SliceStable(fs, func(i, j int) bool {
		if fs[i].Bridge != fs[j].Bridge {
			return fs[i].Bridge < fs[j].Bridge
		}
		if fs[i].Flow.Table != fs[j].Flow.Table {
			return fs[i].Flow.Table < fs[j].Flow.Table
		}
		return fs[i].Flow.Priority > fs[j].Flow.Priority
	})
}

// ExplainOffline computes the explanation without a running agent, from
// what OVSDB and the server say now: the port's VIF, its details, the
// bridges, and what the features were built with (the OVS firewall: the
// port's security groups, read beforehand). The local VLAN is the one the
// port carries. l2pop FDB entries live only in a running agent and are not
// shown. The features must be built for a dry run: their Sync changes
// nothing.
func ExplainOffline(opt Options, l BridgeLayout, vif VIF, dev Device, features ...feature.Feature) *Explanation {
	a := New(opt, Deps{Log: slog.New(slog.DiscardHandler), Features: features})
	a.applyLayout(l)
	a.adopt([]VIF{vif})
	p := a.port(vif.PortID)
	p.vif, p.present, p.dev = vif, true, &dev
	a.wirePort(p)
	a.syncFeatures(context.Background())
	e := a.describe(p)
	e.Source = "computed from OVSDB and the server (no running agent state)"
	owners := a.portOwners(p)
	flows, _ := a.computeFlows(owners)
	for _, o := range owners {
		for br, fs := range flows[o] {
			for _, f := range fs {
				e.Flows = append(e.Flows, ExplainedFlow{Bridge: br, Owner: o, Reason: a.reason(o, br, f.Table), Flow: f})
			}
		}
	}
	sortFlows(e.Flows)
	return e
}

// Write prints the explanation for a person.
func (e *Explanation) Write(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "port %s (%s)\n", e.PortID, e.Source)
	fmt.Fprintf(&b, "  interface   %s  ofport %d  mac %s\n", e.Name, e.OFPort, e.MAC)
	seg := "None"
	if e.SegmentationID != nil {
		seg = fmt.Sprint(*e.SegmentationID)
	}
	phys := e.PhysicalNetwork
	if phys == "" {
		phys = "None"
	}
	fmt.Fprintf(&b, "  network     %s  type %s  segment %s  physnet %s\n", orNone(e.NetworkID), orNone(e.NetworkType), seg, phys)
	vlan := fmt.Sprint(e.LocalVLAN)
	if e.LocalVLAN == DeadVLAN {
		vlan += " (dead)"
	}
	fmt.Fprintf(&b, "  local VLAN  %s  wiring %s  reported up %v\n", vlan, e.Wiring, e.ReportedUp)
	if len(e.Rejected) > 0 {
		fmt.Fprintf(&b, "  rejected    %s (the switch refused their latest flows; retried with back-off)\n", strings.Join(e.Rejected, ", "))
	}
	fmt.Fprintf(&b, "  flows       %d\n", len(e.Flows))
	lastBr, lastTable := "", -1
	for _, f := range e.Flows {
		if f.Bridge != lastBr {
			fmt.Fprintf(&b, "\n%s\n", f.Bridge)
			lastBr, lastTable = f.Bridge, -1
		}
		if int(f.Flow.Table) != lastTable {
			fmt.Fprintf(&b, "  table %d\n", f.Flow.Table)
			lastTable = int(f.Flow.Table)
		}
		fmt.Fprintf(&b, "   %s\n      # %s [owner %s]\n", strings.TrimSpace(f.Flow.String()), f.Reason, f.Owner)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func orNone(s string) string {
	if s == "" {
		return "None"
	}
	return s
}
