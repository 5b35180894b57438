//go:build integration

package main

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ovsagent/ovsagent/internal/agent"
	"github.com/ovsagent/ovsagent/internal/config"
	"github.com/ovsagent/ovsagent/internal/ovsdb"
	"github.com/ovsagent/ovsagent/internal/testing/ovstest"
)

// The [ovs] options that shape the bridges take effect on a real OVS: the
// bridge and patch port names, datapath_type, bridge_mac_table_size and
// the igmp_* options, read from a configuration file and set up by the
// agent's own switch adapter on a private ovsdb-server/ovs-vswitchd.
func TestBridgeOptionsTakeEffect(t *testing.T) {
	o := ovstest.Start(t)
	dir := t.TempDir()
	ini := filepath.Join(dir, "agent.ini")
	body := "[DEFAULT]\ntransport_url = rabbit://u:p@127.0.0.1:5672/\n" +
		"[agent]\ntunnel_types = vxlan\n" +
		"[ovs]\nlocal_ip = 127.0.0.1\ndatapath_type = netdev\nintegration_bridge = br-optint\ntunnel_bridge = br-opttun\n" +
		"int_peer_patch_port = opt-ptun\ntun_peer_patch_port = opt-pint\nbridge_mac_table_size = 1234\n" +
		"igmp_snooping_enable = True\nigmp_flood = True\nigmp_flood_reports = False\nigmp_flood_unregistered = True\n" +
		"ovsdb_connection = " + o.DB + "\n"
	if err := os.WriteFile(ini, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(config.Files(ini), config.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := ovsdb.Dial(ctx, cfg.OVS.OVSDBConnection, ovsdb.Options{RunDir: o.Dir, Timeout: cfg.OVS.OVSDBTimeout})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sw := agent.NewOVSDBSwitch(ctx, c, switchConfig(cfg), slog.New(slog.DiscardHandler))
	if _, err := sw.SetupBridges(ctx); err != nil {
		t.Fatal(err)
	}
	get := func(args ...string) string {
		out, err := o.Vsctl(args...)
		if err != nil {
			t.Fatalf("ovs-vsctl %v: %v", args, err)
		}
		return strings.TrimSpace(out)
	}
	if got := get("get", "Bridge", "br-optint", "datapath_type"); got != "netdev" {
		t.Errorf("br-optint datapath_type = %s", got)
	}
	if got := get("get", "Bridge", "br-optint", "other_config:mac-table-size"); got != `"1234"` {
		t.Errorf("br-optint mac-table-size = %s, want 1234", got)
	}
	if got := get("get", "Bridge", "br-optint", "mcast_snooping_enable"); got != "true" {
		t.Errorf("br-optint mcast_snooping_enable = %s, want true", got)
	}
	// igmp_flood_unregistered = True: OVS's key is the opposite ("disable").
	if got := get("get", "Bridge", "br-optint", "other_config:mcast-snooping-disable-flood-unregistered"); got != `"false"` {
		t.Errorf("br-optint mcast-snooping-disable-flood-unregistered = %s, want false", got)
	}
	// igmp_flood = True, igmp_flood_reports = False on br-int's patch port.
	if got := get("get", "Port", "opt-ptun", "other_config:mcast-snooping-flood"); got != `"true"` {
		t.Errorf("opt-ptun mcast-snooping-flood = %s, want true", got)
	}
	if got := get("get", "Port", "opt-ptun", "other_config:mcast-snooping-flood-reports"); got != `"false"` {
		t.Errorf("opt-ptun mcast-snooping-flood-reports = %s, want false", got)
	}
	if got := get("get", "Port", "opt-pint", "other_config"); got != "{}" {
		t.Errorf("opt-pint other_config = %s, want {} (the settings are br-int's)", got)
	}
	if got := get("get", "Bridge", "br-opttun", "datapath_type"); got != "netdev" {
		t.Errorf("br-opttun datapath_type = %s", got)
	}
	if got := get("get", "Interface", "opt-ptun", "options:peer"); got != `opt-pint` && got != `"opt-pint"` {
		t.Errorf("opt-ptun peer = %s, want opt-pint", got)
	}
	if got := get("port-to-br", "opt-pint"); got != "br-opttun" {
		t.Errorf("opt-pint on %s, want br-opttun", got)
	}
}
