// Package firewall computes the OVS conntrack firewall of the reference
// agent (firewall_driver = openvswitch, br-int tables 71-94) as typed flows.
//
// Everything here is pure: a State (ports with their ofport, local VLAN, MAC,
// addresses and security groups; the groups with their rules; remote group
// and address group membership) and the conjunction id assignment (ConjIDs)
// go in, flows grouped by owner come out. The flows are neutron 2026.2's
// driver's (e.g. table 71 passes a port's RARP); the golden tests compare
// them with the reference's captures, cookies normalised, an older release's
// capture with its listed release differences (scenario_test.go,
// docs/reference/releases.md).
//
// # Owners (br-int; disjoint from internal/pipeline's unprefixed owners)
//
//	"fw:base"          the table defaults (drops, NORMAL, 71 ct_clear, the 72/82
//	                   +inv+trk drops the reference repeats per port)
//	"fw:port:<id>"     every flow of one port in tables 71-94: its rules, its
//	                   remote-group clause 2/2 and accept flows, the 72/82
//	                   ct_mark invalidation flows and, with explicitly_egress_direct,
//	                   its table-94 flows
//	"fw:conj:<vlan>"   the remote-address half (conjunction clause 1/2) of remote
//	                   group / address group rules on one local VLAN (reg6)
//
// Table 60 (the hop from the pipeline into 71/81/73, and 60 p2 resubmit(,94)
// with explicitly_egress_direct) belongs to internal/pipeline.
//
// # What the caller (internal/agent) does
//
//   - Each batch: ids, changed := Update(prev, next, prevIDs), then
//     FlowsForOwners(next, ids, changed) (an empty list deletes the owner).
//     Compute gives every owner (first sync, takeover plan). Each owner is
//     installed as one atomic batch.
//   - At a start, before the first computation: RecoverConjIDs(installed
//     flows of Tables, state) reproduces the conjunction ids already
//     installed where unambiguous and never hands out a block still
//     installed, so a restart does not rewrite every remote-group flow;
//     ReleaseReserved once the first full sync is done.
//   - A port enters State.Ports only with an ofport and a local VLAN.
//     Trusted ports (device_owner network:*) go in with PortSecurity false,
//     which gives the reference's process_trusted_ports flows.
//   - Members: for each remote group, every port (any host) in it: each fixed
//     IP with the port's MAC and each allowed address pair; for an address
//     group its addresses with no MAC. A membership change only dirties
//     fw:conj owners; port owners do not depend on membership.
//   - After a port's flows change, the conntrack entries with ct_mark=1 in
//     its zone (its local VLAN) are deleted, as the reference's
//     _delete_invalid_conntrack_entries_for_port does: not a flow, so the
//     job of internal/secgroup (conntrack.go).
//   - Config.HWOffload is br-int other_config:hw-offload=true (ingress
//     replies by NORMAL); Port.EgressDirectPatch is set only with
//     explicitly_egress_direct: patch-tun's ofport for tunnelled networks,
//     int-<bridge>'s for VLAN/flat ones, 0 otherwise.
//
// Fail closed: a rule, member, address pair or port value that cannot be
// represented as written is skipped whole, never translated in part (that
// would allow more than it says); Problems lists each for the agent to log
// and count (validate.go).
//
// A MAC claimed by several filtered ports of one network (a shared
// allowed-address-pair MAC) gets its table-73 entry from the same winner as
// pipeline's winsAAPMAC (own MAC, then lowest ofport, then smallest id):
// keep the two in step.
//
// # Beyond the reference
//
//   - Stateless groups (stateful=False, ignored by the reference): a port
//     whose groups are all stateless gets no conntrack (71 sends accepted
//     sources to 72 without ct, rules match without ct_state, 81 goes to 82
//     directly); its conjunctions have their own id block.
//   - Conjunction ids are keyed by (remote, direction, ethertype, stateless),
//     not also by the rule's own group: fewer address flows when several
//     groups name one remote; the ids equal the reference's in the captured
//     scenario.
package firewall
