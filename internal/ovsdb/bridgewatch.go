package ovsdb

import (
	"context"
	"slices"
)

// BridgeEvent says a watched bridge appeared (again) or went away. A bridge
// deleted and re-created between two reads (new row) comes as Removed then
// Added: the reference re-runs its setup for re-created physical bridges.
type BridgeEvent struct {
	Name    string
	Removed bool
	UUID    string
}

// WatchBridges reports changes of the named bridges' existence, starting
// with an Added event for each that exists now. The channel closes when ctx ends.
func (c *Client) WatchBridges(ctx context.Context, names ...string) <-chan []BridgeEvent {
	out := make(chan []BridgeEvent, 16)
	wake, stop := c.wakeups()
	go func() {
		defer close(out)
		defer stop()
		seen := map[string]string{} // name -> bridge uuid
		for {
			select {
			case <-ctx.Done():
				return
			case <-wake:
			}
			v, err := c.readView(ctx, false)
			if err != nil {
				continue
			}
			var batch []BridgeEvent
			for _, n := range slices.Sorted(slices.Values(names)) {
				b := v.bridges[n]
				old, had := seen[n]
				switch {
				case b != nil && !had:
					batch = append(batch, BridgeEvent{Name: n, UUID: b.UUID})
					seen[n] = b.UUID
				case b != nil && old != b.UUID:
					batch = append(batch, BridgeEvent{Name: n, UUID: old, Removed: true}, BridgeEvent{Name: n, UUID: b.UUID})
					seen[n] = b.UUID
				case b == nil && had && v.complete:
					batch = append(batch, BridgeEvent{Name: n, UUID: old, Removed: true})
					delete(seen, n)
				}
			}
			if len(batch) == 0 {
				continue
			}
			select {
			case out <- batch:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}
