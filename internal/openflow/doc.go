// Package openflow is ovsagent's own OpenFlow 1.3 edge: typed flows
// (flow.go, fields.go), their wire codec with the Nicira/ONF extensions
// (codec*.go, decode.go), their rendering in the exact text of
// `ovs-ofctl -O OpenFlow13 dump-flows --no-stats` (render*.go), a connection
// per bridge (conn.go) and a reconciler that applies each batch as one
// atomic bundle (reconcile*.go).
//
// The pure packages (pipeline, firewall) build values of these types and
// nothing else; they never build flow strings.
//
// # Flows
//
//   - Flow.Key() (table, priority, canonical match) is the identity of an
//     entry, as OpenFlow keys it; field order and masked-off value bits do
//     not matter. Cookie, flags, timeouts and actions are its content.
//   - Flow.String() renders as ovs-ofctl does (cookie omitted when 0, table
//     when 0, priority when 32768). A whole-field Load renders and encodes as
//     set_field, a partial one as load:..->NXM_..[a..b].
//   - 128-bit match fields keep their high half in ValueHi/MaskHi
//     (Value128/SetValue128 convert).
//   - Opaque is what the decoder returns for an action or instruction it does
//     not model (another controller's flow): a dump never fails on it.
//
// # Connection (Dial → *Conn, one per bridge management socket)
//
// Bundle(ctx, mods) is atomic: on error nothing changed, and *BundleError
// names the offending flow_mods. While the connection is down calls return
// ErrNotConnected; it reconnects with backoff and runs Options.OnReconnect
// after each reconnection (the agent then re-reads the bridge: ovs-ctl's
// restore drops flow flags).
//
// # Reconciler (NewReconciler(conn, cookie), one per bridge)
//
// It keeps, per owner key, the flows the caller last applied and what the
// bridge holds, and turns each Apply into one bundle of adds, modifies and
// deletes:
//
//	Adopt(ctx)               read the bridge at start: an earlier run's flows
//	                         keep forwarding, nothing is deleted
//	Apply(ctx, changes)      owner → its complete flows (empty deletes the owner)
//	ApplyAndSweep(ctx, ch)   the same bundle also deletes what no owner desires
//	                         and SetSweepable allows (call once in sync)
//	Reset()                  after an ovs-vswitchd restart: the next Apply
//	                         re-installs every desired flow
//	Installed(), Desired(o)  what the bridge holds with its owner ("" for
//	                         adopted flows nobody desires); one owner's flows
//	Cookie(), SetCookie(c)   the round's cookie, written on every flow
//
// A failed bundle leaves bridge and cache unchanged: the caller retries.
// When the switch rejects some owners' flows, the others are applied without
// them and Apply returns *OwnersRejectedError naming them; each keeps what
// the bridge held for it (reconcile_isolate.go). Apply does not keep the
// given slices: owners are stored in wire form and decoded only to re-send,
// delete, or for Desired/Installed (diagnostics). Digest(flows) summarises
// a list (equal digests mean the same flow_mods, cookie included); the agent
// keeps it per owner instead of the flows.
//
// The owner of a flow is not on the wire: the cookie says only which run
// installed it. Ask the reconciler (Installed) or `ovs-agent explain`.
package openflow
