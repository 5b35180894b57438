package main

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/ovsagent/ovsagent/internal/feature"
	"github.com/ovsagent/ovsagent/internal/neutron"
	of "github.com/ovsagent/ovsagent/internal/openflow"
	"github.com/ovsagent/ovsagent/internal/qos"
)

// buildQoS builds the qos extension ([agent] extensions = qos) on the agent's edges.
// In a dry run it gets no edge that changes anything.
func buildQoS(d featureDeps) (feature.Feature, error) {
	deps := qos.Deps{
		Options:           qos.Options{MeterBandwidth: d.Config.OVS.QoSMeterBandwidth},
		MinBandwidthQoSID: uuid.NewString(),
	}
	if d.DryRun || d.OVSDB == nil || d.OpenFlow == nil || d.Client == nil || d.Cache == nil {
		return qos.New(deps), nil
	}
	brInt := d.Config.OVS.IntegrationBridge
	conn := func() (*of.Conn, error) { return d.OpenFlow.Conn(brInt) }
	deps.Rows = d.OVSDB
	deps.Ports = d.OVSDB.BridgePorts
	deps.Meters = func() (qos.Meters, error) { return conn() }
	deps.Features = func(ctx context.Context) (of.MeterFeatures, error) {
		c, err := conn()
		if err != nil {
			return of.MeterFeatures{}, err
		}
		return c.MeterFeatures(ctx)
	}
	deps.Pull = func(ctx context.Context, id string) (*neutron.QosPolicy, error) {
		r, err := d.Client.Pull(ctx, neutron.TypeQosPolicy, id)
		if err != nil || r == nil {
			return nil, err
		}
		pol, ok := r.(*neutron.QosPolicy)
		if !ok {
			return nil, fmt.Errorf("pull QosPolicy %s: got a %s", id, r.ResourceType())
		}
		// cached, so that a resync asks the server for it again
		d.Cache.Update(pol, false)
		return pol, nil
	}
	deps.Port = d.Cache.Port
	deps.Network = d.Cache.Network
	return qos.New(deps), nil
}
