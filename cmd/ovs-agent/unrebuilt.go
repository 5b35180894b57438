package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/ovsagent/ovsagent/internal/agent"
	"github.com/ovsagent/ovsagent/internal/feature"
	"github.com/ovsagent/ovsagent/internal/openflow"
	"github.com/ovsagent/ovsagent/internal/ovsdb"
)

// checkUnrebuilt refuses a start or takeover on a host carrying state of the
// reference's features that ovs-agent would sweep and not rebuild (DVR
// flows, QoS rows and rate-limit flows, trunk bridges, log flows): the
// traffic that state carries would break. One error naming every reason.
func checkUnrebuilt(ctx context.Context, oc *ovsdb.Client, l agent.BridgeLayout, flows map[string][]openflow.Flow, features []feature.Feature) error {
	h := agent.HostState{Layout: l, Flows: flows}
	var err error
	if h.Bridges, err = oc.Bridges(ctx); err != nil {
		return err
	}
	if h.QoSRows, err = oc.CountRows(ctx, "QoS"); err != nil {
		return err
	}
	if h.QueueRows, err = oc.CountRows(ctx, "Queue"); err != nil {
		return err
	}
	if reasons := agent.UnrebuiltState(h, features...); len(reasons) > 0 {
		return fmt.Errorf("refusing to take this host over: it carries state ovs-agent would remove and not rebuild: %s", strings.Join(reasons, "; "))
	}
	return nil
}

// unrebuiltTables are the tables UnrebuiltState looks at.
func unrebuiltTables(t uint8) bool { return t <= 9 || t == 58 || t == 59 || (t >= 91 && t <= 93) }
