//go:build integration

package ovsdb

import (
	"errors"
	"strings"
	"testing"

	"github.com/ovsagent/ovsagent/internal/testing/ovstest"
)

func TestTrunkRowsEdges(t *testing.T) {
	o := ovstest.Start(t)
	c := dial(t, o)
	ctx := testCtx(t)
	p := uniq(t)
	intBr, tbr := p+"-int", "tbr-"+p[3:]
	for _, b := range []string{intBr, tbr} {
		vsctl(t, o, "add-br", b, "--", "set", "Bridge", b, "datapath_type=netdev")
	}
	tag := 7
	pair := []TrunkPatch{
		{Bridge: intBr, Name: "spi-" + p, Peer: "spt-" + p, ExternalIDs: map[string]string{"iface-id": "s"}},
		{Bridge: tbr, Name: "spt-" + p, Peer: "spi-" + p, ExternalIDs: map[string]string{"iface-id": "s"}, AccessTag: &tag},
	}
	if err := c.EnsureTrunkPatches(ctx, pair...); err != nil {
		t.Fatal(err)
	}
	// An operator's keys survive, ours are fixed, nothing is sent when all is in place.
	vsctl(t, o, "set", "Interface", "spi-"+p, "external_ids:iface-id=wrong", "external_ids:foreign=yes", "options:extra=1")
	vsctl(t, o, "set", "Port", "spt-"+p, "tag=9")
	if err := c.EnsureTrunkPatches(ctx, pair...); err != nil {
		t.Fatal(err)
	}
	if got := vsctl(t, o, "get", "Interface", "spi-"+p, "external_ids", "options"); got != "{foreign=yes, iface-id=s}\n{extra=\"1\", peer=spt-"+p+"}" {
		t.Errorf("spi- after the fix: %q", got)
	}
	if got := vsctl(t, o, "get", "Port", "spt-"+p, "tag", "vlan_mode"); got != "7\naccess" {
		t.Errorf("spt- after the fix: %q", got)
	}
	// A missing bridge is ErrBridgeMissing; a name taken on another bridge is refused.
	if err := c.EnsureTrunkPatches(ctx, TrunkPatch{Bridge: "tbr-none", Name: "spt-x", Peer: "y"}); !errors.Is(err, ErrBridgeMissing) {
		t.Errorf("missing bridge: %v", err)
	}
	if err := c.EnsureTrunkPatches(ctx, TrunkPatch{Bridge: tbr, Name: "spi-" + p, Peer: "y"}); err == nil || !strings.Contains(err.Error(), "is on bridge") {
		t.Errorf("port of another bridge: %v", err)
	}
	// Metadata merges; an unknown interface is ErrNotFound.
	if err := c.MergeInterfaceExternalIDs(ctx, "spt-"+p, map[string]string{"trunk_id": "t"}); err != nil {
		t.Fatal(err)
	}
	if got := vsctl(t, o, "get", "Interface", "spt-"+p, "external_ids"); got != "{iface-id=s, trunk_id=t}" {
		t.Errorf("metadata: %q", got)
	}
	if err := c.MergeInterfaceExternalIDs(ctx, "nope", map[string]string{"a": "b"}); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown interface: %v", err)
	}
	// Ports of another bridge than named are not deleted; the bridge goes with its peers.
	if err := c.DeleteBridgePorts(ctx, BridgePort{Bridge: tbr, Name: "spi-" + p}); err != nil {
		t.Fatal(err)
	}
	if got := vsctl(t, o, "port-to-br", "spi-"+p); got != intBr {
		t.Errorf("spi- deleted through the wrong bridge: %q", got)
	}
	if err := c.DeleteBridge(ctx, tbr, BridgePort{Bridge: intBr, Name: "spi-" + p}); err != nil {
		t.Fatal(err)
	}
	if got := vsctl(t, o, "list-br"); got != intBr {
		t.Errorf("bridges left: %q", got)
	}
	if got := vsctl(t, o, "list-ports", intBr); got != "" {
		t.Errorf("ports left on %s: %q", intBr, got)
	}
	if err := c.DeleteBridge(ctx, tbr); err != nil {
		t.Errorf("deleting a missing bridge: %v", err)
	}
}
