package overlay

// What the tests (package overlay_test, which uses the shared fakes of
// internal/testing/fakes) read and set of the overlay's state.

// SyncFailures is how often tunnel_sync of typ failed in a row (-1: none pending).
func (o *Overlay) SyncFailures(typ string) int {
	if r := o.sync[typ]; r != nil {
		return r.failures
	}
	return -1
}

// SetSyncFailures makes tunnel_sync of typ pending after n failures.
func (o *Overlay) SetSyncFailures(typ string, n int) { o.sync[typ] = &retry{failures: n} }

// Refreshing reports whether the FDB of network id is to be asked for.
func (o *Overlay) Refreshing(id string) bool { return o.refresh[id] }

// AwaitingFDB reports whether the FDB of network id is awaited.
func (o *Overlay) AwaitingFDB(id string) bool { _, ok := o.fdbAwait[id]; return ok }

// FDBNetworks is how many networks have an l2pop FDB.
func (o *Overlay) FDBNetworks() int { return len(o.fdb) }

// NoPeers is noPeers.
func (o *Overlay) NoPeers() bool { return o.noPeers() }
