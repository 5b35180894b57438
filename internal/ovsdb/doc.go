// Package ovsdb is the agent's narrow client of the Open_vSwitch database: it
// ensures bridges, patch pairs and tunnel ports the way the reference agent
// lays them out, writes port tags and other_config in batches, and watches
// bridges for VM ports. It talks OVSDB (RFC 7047, package wire) only; it never runs ovs-vsctl.
//
// Usage, in the agent's order:
//
//	c, err := ovsdb.Dial(ctx, cfg.OVSDBConnection, ovsdb.Options{}) // tcp:… or unix:…; retries until ctx ends
//	ok, _ := c.BridgeExists(ctx, "br-phys")                          // bridge_mappings bridges must pre-exist
//	c.EnsureBridges(ctx, ovsdb.ReferenceBridge("br-int", "netdev", 50000, true, ovsdb.DefaultIGMP()), …)
//	c.EnsurePatchPorts(ctx, ovsdb.PatchPair("br-int", "patch-tun", "br-tun", "patch-int")...)
//	c.EnsureTunnelPorts(ctx, ovsdb.TunnelPort{Bridge: "br-tun", Type: "vxlan", RemoteIP: …, LocalIP: …})
//	ports, _ := c.BridgePorts(ctx, "br-int")                         // ofports, tags, other_config (VLAN adoption)
//	m := c.WatchPorts(ctx, "br-int")                                 // VM port deltas on m.Events()
//	c.SetPortBindings(ctx, []ovsdb.PortBinding{…})                    // one transaction for all ports
//
// Every write is one transaction built from the difference between what is
// wanted and what the monitor cache holds (after a round trip that brings the
// cache up to date), so a repeated call that finds nothing to change sends
// nothing. Ensure* wait until ovs-vswitchd has applied the change (next_cfg /
// cur_cfg, as ovs-vsctl does), so ofports are known when they return, and
// report ports ovs-vswitchd could not create as *FailedPortsError.
//
// The protocol is ours (package wire: a JSON-RPC 1.0 session, update
// notifications handled in order on the reader goroutine, the server's echo
// answered) and package vswitchd holds hand-written rows of the monitored
// columns only, checked against vswitch.ovsschema by its test: the agent's
// use is small (monitor a few tables, read the cache, send raw transactions)
// and libovsdb brought a reflected model cache and a large dependency tree
// for it (figures in bench/README.md). The cache applies one whole update,
// or after a reconnect one whole database, under its lock, so a read never
// sees a half-refilled cache.
package ovsdb

// vswitch.ovsschema is the schema of the OVS we target (3.1, schema 8.3.1),
// copied from /usr/share/openvswitch/vswitch.ovsschema: package vswitchd's
// test checks the monitored columns against it.
