// Package pipeline computes, as pure functions, the OpenFlow flows the agent
// wants on br-int, br-tun and the physical bridges from the agent's state,
// and allocates local VLANs.
//
// The shape follows Antrea's pipeline: tables are declared once (tables.go,
// with the reference agent's fixed numbers instead of a derived order) and
// each feature is a small function returning typed openflow.Flow values for
// one owner. Nothing here does I/O or builds flow strings.
//
// # Using it
//
// The agent keeps a *State (state.go): Config, the bridges and their patch
// ofports, the local VLAN mappings (Networks, keyed by NetKey = network id +
// segmentation id, each with its local VLAN and l2pop FDB), the VIFs (Ports)
// and the tunnel ports (Tunnels). Its port lifecycle keeps the mappings with
// Mappings (ports per mapping, local VLANs from a VLANManager fed at start
// with the tags found in OVSDB: Adopt); internal/overlay keeps Tunnels and
// each Network's FDB.
//
//	Compute(s)              every flow: bridge name -> owner -> flows
//	FlowsFor(s, owner)      one owner's flows, by bridge name
//	Owners(s)               every owner key the state has
//	Dependents(s, owner)    other owners to recompute when owner's object changes
//
// Flows carry the bridge cookie from the state (IntBridge.Cookie etc.) unless
// the reconciler overrides it; br-tun's learn action embeds TunBridge.Cookie.
//
// # Owners
//
//	"base"                 bridge defaults on br-int, br-tun and every physical bridge
//	"physnet:<physnet>"    one bridge_mappings entry: int-X / phy-X drops (+ egress-direct goto)
//	"net:<net-id>/<seg>"   one local VLAN mapping ("None" when no segmentation id):
//	                       br-int/phys VLAN translation, or br-tun tun_id->VLAN, flood,
//	                       l2pop unicast and ARP responder flows
//	"port:<port-id>"       one VIF: dead drop, firewall entry (table 60), anti-spoofing
//	                       (24/25/0, noop firewall), egress direct (60/61/62)
//	"tun:<remote-ip>"      the tunnel ports to one remote IP (one per type): table 0 in_port=T -> 3/4/6
//
// The firewall package uses "fw:"-prefixed owners on br-int, so the two sets
// never collide; table 60 is the pipeline's, tables 71-94 the firewall's.
//
// # Reference
//
// Flows match neutron-openvswitch-agent 2026.2 (29.x: PACKET_RATE_LIMIT 58,
// BANDWIDTH_RATE_LIMIT 59, table 60's default NORMAL at priority 1, the GARP/
// RA/NA learn flows in br-tun table 10), whatever release the server runs:
// flows are agent-local. docs/reference/releases.md lists what each release
// changed. The refenv golden tests (refenv_test.go) check br-tun and br-phys
// byte for byte and br-int for every table but 71-94, after normalising
// cookies, against the 2026.2 capture, and check that the Zed 21.0.0 capture
// differs from our flows by exactly the listed release changes.
//
// # Deliberate differences from the reference
//
//   - l2pop flooding: the reference provisions a tunnelled network's table-22
//     flood flow with every tunnel port of its type and narrows it when a
//     flooding entry arrives; we flood only to the agents l2pop named.
//   - Flood output ports are sorted by ofport (the reference: set order).
//   - Dead and admin-down ports get only the table 0 p2 drop; the reference
//     firewall may also steer an admin-down port (tag 4095) into 71/81, which
//     no frame can reach past the drop.
//   - A MAC listed in the allowed address pairs of several ports of a network
//     gets its table-60 ingress flow from one port only (own MAC, then lowest
//     ofport); the reference lets the last writer win and deletes the flow for
//     all when any claimant leaves.
//   - Two mappings claiming one provider segment of a physnet: the lowest
//     local VLAN gets the translation flows; the reference: the last one.
//
// Not implemented: DVR (tables 1-4, 9; br-phys 1-3), the dhcp extension
// (77/78), local_ip (30/31 per port), QoS DSCP, packet-rate and bandwidth meters
// (58/59 per port), trunk ports.
package pipeline
