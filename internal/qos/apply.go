package qos

import (
	"context"
	"fmt"

	of "github.com/ovsagent/ovsagent/internal/openflow"
)

// Meters is the part of an OpenFlow connection that owns br-int's meters
// (openflow.Conn implements it).
type Meters interface {
	DumpMeters(ctx context.Context) (map[uint32]of.MeterConfig, error)
	MeterMods(ctx context.Context, mods []of.MeterMod) error
}

// MeterConfigs turns plans and their ids into the bridge's wanted meters. Meters are
// QoS's alone on br-int (no other reference feature creates any), so this is the
// whole meter table.
func MeterConfigs(plans []Plan, ids map[string]uint32) (map[uint32]of.MeterConfig, error) {
	out := map[uint32]of.MeterConfig{}
	for _, p := range plans {
		for _, m := range p.Meters {
			id, ok := ids[m.Key]
			if !ok {
				continue
			}
			if _, dup := out[id]; dup {
				return nil, fmt.Errorf("qos: meter id %d given twice", id)
			}
			out[id] = m.Config(id)
		}
	}
	return out, nil
}

// SyncMeters makes the bridge's meters equal want around applyFlows, the flow change
// that starts or stops using them: new and changed meters first (a flow naming a
// meter the switch lacks is refused), meters no flow uses any more after (deleting a
// meter deletes its flows).
func SyncMeters(ctx context.Context, m Meters, want map[uint32]of.MeterConfig, applyFlows func(context.Context) error) error {
	have, err := m.DumpMeters(ctx)
	if err != nil {
		return fmt.Errorf("qos: read meters: %w", err)
	}
	before, after := of.PlanMeters(have, want)
	if err := m.MeterMods(ctx, before); err != nil {
		return fmt.Errorf("qos: meters: %w", err)
	}
	if err := applyFlows(ctx); err != nil {
		return err
	}
	if err := m.MeterMods(ctx, after); err != nil {
		return fmt.Errorf("qos: delete meters: %w", err)
	}
	return nil
}
