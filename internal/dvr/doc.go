// Package dvr decides the flows of distributed virtual routing (DVR) on
// br-int, br-tun and the physical bridges, as the reference agent builds
// them (neutron ovs_dvr_neutron_agent.py with the native ofctl bridges
// br_int.py, br_tun.py, br_phys.py and br_dvr_process.py, 2026.2), from a
// state that the agent assembles out of the DVR RPCs and its ports:
//
//   - this host's DVR MAC (get_dvr_mac_address_by_host) and every DVR host's
//     (get_dvr_mac_address_list, then dvr_mac_address_update casts);
//   - the router interfaces (qr-, device_owner
//     network:router_interface_distributed), centralized SNAT ports (sg-,
//     network:router_centralized_snat) and DVR-serviced ports (compute:*,
//     network:dhcp, load balancers) plugged on this host, with their subnets
//     (get_subnet_for_dvr: gateway_ip, gateway_mac) and networks (local VLAN,
//     type, physical network, segmentation id).
//
// It is pure: Flows is a function of State, golden-tested against the
// reference's flows captured in refenv (docs/reference/captures-2026.2/dvr,
// testdata/). It keeps no history, so it does not inherit the reference's
// order-dependent results (docs/dvr.md lists them).
//
// Not here, because they change flows the pipeline package owns rather than
// add DVR's own: with DVR, br-tun's tunnel-to-local-VLAN flows go to table 9
// (DVR_NOT_LEARN) instead of 10, and br-phys's local VLAN translation moves
// from table 0 to table 2 (LOCAL_VLAN_TRANSLATION). The three flows Flows
// returns with the same table, priority and match as a non-DVR pipeline flow
// (br-tun t0 in_port=patch-int, br-phys t0 in_port=phy-br-X, br-int t0
// in_port=int-br-X) are the DVR versions and replace the pipeline's.
//
// Feature (feature.go) is DVR on the agent's feature seam. At a start or a
// takeover (unrebuilt.go) the reference's flows in DVR's tables are taken
// over when they have the form of a flow ovs-agent builds (Classify: table,
// priority, matched fields and actions, the values left out: they come from
// the server's state, which the check does not have); the agent installs
// its own beside them and sweeps the rest once the feature stops Waiting
// (this host's MAC and its router interfaces' subnets known). A flow of
// another form is refused, named; without enable_distributed_routing any
// flow in DVR's tables is (UnrebuiltWithoutDVR).
package dvr
