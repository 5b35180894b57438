package agent

import "context"

// unplugDeactivated removes from br-int the VIF of every port whose binding
// on this host was deactivated, as the reference's
// process_deactivated_bindings does: the port leaves the bridge (and its
// removal goes through the ordinary unplug path) instead of staying dead on
// VLAN 4095. A port no longer on the bridge is forgotten; a failed delete
// is retried on the next batch.
func (a *Agent) unplugDeactivated(ctx context.Context) {
	for id := range a.deactivated {
		p := a.ports[id]
		if p == nil || !p.present || p.vif.Name == "" {
			delete(a.deactivated, id)
			continue
		}
		if err := a.d.Switch.DeleteVIFPort(ctx, p.vif.Name); err != nil {
			a.log.Error("agent: binding deactivated: cannot unplug the port; retrying", "port", id, "vif", p.vif.Name, "err", err)
			continue
		}
		a.log.Info("agent: port unplugged from the integration bridge: its binding here was deactivated", "port", id, "vif", p.vif.Name)
		delete(a.deactivated, id)
	}
}
