// Package ovsdb is the agent's narrow client of the Open_vSwitch database: it
// ensures bridges, patch pairs and tunnel ports the way the reference agent
// lays them out, writes port tags and other_config in batches, and watches
// br-int for VM ports. It talks OVSDB (libovsdb) only; it never runs ovs-vsctl.
//
// Every write is one transaction built from the difference between what is
// wanted and what the monitor cache holds, so a repeated call that finds
// nothing to change sends nothing.
package ovsdb

// The models are generated from the schema of the OVS we target (3.1, schema
// 8.3.1), copied here from /usr/share/openvswitch/vswitch.ovsschema so that
// generation does not depend on the build host.
//go:generate go run github.com/ovn-kubernetes/libovsdb/cmd/modelgen -p vswitchd -o vswitchd vswitch.ovsschema
