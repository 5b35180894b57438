// Package metrics holds ovsagent's Prometheus metrics and the HTTP endpoint
// that serves them with the probes (/livez, /readyz, /healthz).
//
// Every metric lives on its Metrics value (there is no global registry) so
// tests and several agents in one process do not collide. All methods are
// safe on a nil *Metrics, which records nothing: code that has no metrics
// (unit tests, one-shot subcommands) passes nil.
//
// The package writes the Prometheus text format itself (expose.go) instead
// of using client_golang: the agent exports a dozen families, and the
// library, with protobuf and its runtime/metrics Go collector, cost more
// binary and heap than the agent's own metrics (bench/README.md).
package metrics

import (
	"strconv"
	"sync/atomic"
	"time"
)

// Metrics is the agent's metric set.
type Metrics struct {
	portsWired     *gauge
	portWiring     *histogram
	wiringStage    *vec[histogram]
	rpcDuration    *vec[histogram]
	rpcErrors      *vec[counter]
	flows          *vec[gauge]
	bundleApply    *vec[histogram]
	ownerRejected  *vec[counter]
	ownersHeld     *vec[gauge]
	resyncs        *vec[counter]
	loopDuration   *histogram
	malformed      *vec[counter]
	fwSkipped      *vec[counter]
	inSyncGauge    *gauge
	updateDevCalls *counter
	amqpUp         *vec[probe]
	ovsdbUp        *vec[probe]
	openflowUp     *vec[probe]
	declFailures   *vec[counter]

	// handlerErrors is promhttp's promhttp_metric_handler_errors_total,
	// kept for whoever alerts on it: "encoding" counts scrapes whose
	// response could not be written; nothing here can fail to gather.
	handlerErrors *vec[counter]

	fams   []family      // the families above, for the exposition
	extra  extraFamilies // the features' (feature.go)
	inSync atomic.Bool
}

// Latency buckets: the agent's own share is milliseconds, the server's
// floor a few hundred ms, the reference agent seconds; at 1,000 ports a
// port waits minutes on the server (bench/README.md), which the buckets up
// to 15 min keep apart instead of lumping into +Inf.
var latencyBuckets = []float64{.001, .0025, .005, .01, .02, .05, .1, .2, .3, .5, .75, 1, 1.5, 2.5, 5, 10, 30,
	60, 120, 180, 300, 600, 900}

// New creates the metric set.
func New() *Metrics {
	hist := func() *histogram { return newHistogram(latencyBuckets) }
	gaugeVec := func(names ...string) *vec[gauge] { return newVec(func() *gauge { return new(gauge) }, names...) }
	counterVec := func(names ...string) *vec[counter] { return newVec(func() *counter { return new(counter) }, names...) }
	histVec := func(names ...string) *vec[histogram] { return newVec(hist, names...) }

	m := &Metrics{}
	var fams []family
	// Unlabelled metrics are a vector's one child, created here so that they
	// are exported from the start, as client_golang exported them.
	gaugeOne := func(name, help string) *gauge {
		v := gaugeVec()
		fams = append(fams, gaugeFamily(name, help, v))
		return v.with("", "")
	}
	counterOne := func(name, help string) *counter {
		v := counterVec()
		fams = append(fams, counterFamily(name, help, v))
		return v.with("", "")
	}
	histOne := func(name, help string) *histogram {
		v := histVec()
		fams = append(fams, histogramFamily(name, help, v))
		return v.with("", "")
	}
	histMany := func(name, help string, label string) *vec[histogram] {
		v := histVec(label)
		fams = append(fams, histogramFamily(name, help, v))
		return v
	}
	counterMany := func(name, help string, names ...string) *vec[counter] {
		v := counterVec(names...)
		fams = append(fams, counterFamily(name, help, v))
		return v
	}

	m.portsWired = gaugeOne("ovsagent_ports_wired", "VM ports on br-int wired and reported up.")
	m.portWiring = histOne("ovsagent_port_wiring_seconds",
		"From the OVSDB event of a port to the server's reply to update_device_list (port ACTIVE).")
	m.wiringStage = histMany("ovsagent_port_wiring_stage_seconds",
		"Where a port's wiring time goes, by stage: vswitchd (OVSDB event to ofport), server_data (ofport to the port's details), "+
			"agent (details to wired, less dataplane), dataplane (the wiring batch's OVSDB tag transaction and OpenFlow bundles, until the switch confirmed them), "+
			"report_queue (wired to update_device_list sent: a call slot), server (sent to the server's reply).", "stage")
	m.rpcDuration = histMany("ovsagent_rpc_duration_seconds", "Duration of RPC calls to neutron-server, by method.", "method")
	m.rpcErrors = counterMany("ovsagent_rpc_errors_total", "RPC calls to neutron-server that failed, by method.", "method")
	m.flows = gaugeVec("bridge", "table")
	fams = append(fams, gaugeFamily("ovsagent_flows", "Flows the agent owns, by bridge and table.", m.flows))
	m.bundleApply = histMany("ovsagent_bundle_apply_seconds", "Time to apply one OpenFlow bundle, by bridge.", "bridge")
	m.ownerRejected = counterMany("ovsagent_flow_owner_rejected_total",
		"Owners whose flows the switch rejected in a bundle, by bridge and owner kind (the rest of the bundle was applied; the owner keeps its previous flows and is retried with back-off).",
		"bridge", "kind")
	m.ownersHeld = gaugeVec("bridge")
	fams = append(fams, gaugeFamily("ovsagent_flow_owners_rejected",
		"Owners whose latest flows the switch rejected and that are not applied yet, by bridge (their ports are not reported up).", m.ownersHeld))
	m.resyncs = counterMany("ovsagent_resyncs_total", "Full resyncs, by reason.", "reason")
	m.loopDuration = histOne("ovsagent_loop_duration_seconds", "Duration of one batch of the agent loop.")
	m.malformed = counterMany("ovsagent_malformed_messages_total",
		"Messages dropped because they could not be understood, by topic and reason.", "topic", "reason")
	m.fwSkipped = counterMany("ovsagent_firewall_skipped_total",
		"Security group rules, remote group / address group members, allowed address pairs and port values the firewall left out because they cannot be represented (translating the rest would allow more), by kind and reason.", "kind", "reason")
	m.inSyncGauge = gaugeOne("ovsagent_in_sync",
		"1 when the dataplane matches the agent's state and the server knows every port's status.")
	m.updateDevCalls = counterOne("ovsagent_update_device_list_calls_total",
		"update_device_list batches sent (one per loop batch that had ports to report).")
	// The connections' states, read from their owners at scrape time.
	probeOne := func(name, help string, names ...string) *vec[probe] {
		v := newVec(func() *probe { return new(probe) }, names...)
		fams = append(fams, probeFamily(name, help, v))
		return v
	}
	m.amqpUp = probeOne("ovsagent_amqp_connected", "1 while the connection to the message broker (transport_url) is up, else 0.")
	m.ovsdbUp = probeOne("ovsagent_ovsdb_connected", "1 while the OVSDB session (ovsdb_connection) is up, else 0.")
	m.openflowUp = probeOne("ovsagent_openflow_connected", "1 while the OpenFlow connection to the bridge is up, else 0, by bridge.", "bridge")
	fams = append(fams, buildInfoFamily(readBuildInfo()))
	m.declFailures = counterMany("ovsagent_amqp_declare_failures_total",
		"Queue and exchange declarations, bindings and consumers the broker refused (each retried), by queue and reason (the AMQP reply code, e.g. precondition_failed for arguments that differ from the existing queue's).", "queue", "reason")
	m.handlerErrors = counterMany("promhttp_metric_handler_errors_total",
		"Total number of internal errors encountered by the promhttp metric handler.", "cause")
	m.handlerErrors.with("encoding", "")
	m.handlerErrors.with("gathering", "")
	m.fams = fams
	return m
}

// AppendText appends the exposition of every metric, with the go_* and
// process_* families read now, in the Prometheus text format 0.0.4.
func (m *Metrics) AppendText(b []byte) []byte {
	fams := make([]family, 0, len(m.fams)+48)
	fams = append(fams, m.fams...)
	fams = append(fams, m.extraFams()...)
	fams = append(fams, goFamilies()...)
	fams = append(fams, processFamilies()...)
	return appendFamilies(b, fams)
}

// SetPortsWired sets the number of wired ports.
func (m *Metrics) SetPortsWired(n int) {
	if m != nil {
		m.portsWired.set(float64(n))
	}
}

// ObservePortWiring records one port's event → ACTIVE latency.
func (m *Metrics) ObservePortWiring(d time.Duration) {
	if m != nil {
		m.portWiring.observe(d.Seconds())
	}
}

// ObserveWiringStage records the time one port spent in one stage of its
// wiring (see the metric's help for the stages).
func (m *Metrics) ObserveWiringStage(stage string, d time.Duration) {
	if m != nil {
		m.wiringStage.with(stage, "").observe(d.Seconds())
	}
}

// ObserveRPC records one RPC call; err non-nil counts an error.
func (m *Metrics) ObserveRPC(method string, d time.Duration, err error) {
	if m == nil {
		return
	}
	m.rpcDuration.with(method, "").observe(d.Seconds())
	if err != nil {
		m.rpcErrors.with(method, "").inc()
	}
}

// SetFlows sets the number of flows the agent owns on bridge, by table; the
// bridge's tables absent from counts are no longer exported.
func (m *Metrics) SetFlows(bridge string, counts map[uint8]int) {
	if m == nil {
		return
	}
	// Under the vector's lock, so that a scrape sees the bridge's old
	// tables or its new ones, never none.
	m.flows.mu.Lock()
	defer m.flows.mu.Unlock()
	for k := range m.flows.kids {
		if k[0] == bridge {
			delete(m.flows.kids, k)
		}
	}
	for t, n := range counts {
		g := new(gauge)
		g.set(float64(n))
		m.flows.kids[m.flows.key(bridge, strconv.Itoa(int(t)))] = g
	}
}

// ObserveBundle records one bundle apply on bridge.
func (m *Metrics) ObserveBundle(bridge string, d time.Duration) {
	if m != nil {
		m.bundleApply.with(bridge, "").observe(d.Seconds())
	}
}

// IncOwnerRejected counts one owner whose flows the switch rejected on
// bridge; kind is the owner key's kind ("fw:port", "port", "net", ...).
func (m *Metrics) IncOwnerRejected(bridge, kind string) {
	if m != nil {
		m.ownerRejected.with(bridge, kind).inc()
	}
}

// SetOwnersRejected sets the number of owners of bridge whose flows the
// switch rejects now.
func (m *Metrics) SetOwnersRejected(bridge string, n int) {
	if m != nil {
		m.ownersHeld.with(bridge, "").set(float64(n))
	}
}

// IncResync counts a full resync.
func (m *Metrics) IncResync(reason string) {
	if m != nil {
		m.resyncs.with(reason, "").inc()
	}
}

// ObserveLoop records one loop batch.
func (m *Metrics) ObserveLoop(d time.Duration) {
	if m != nil {
		m.loopDuration.observe(d.Seconds())
	}
}

// IncMalformed counts a dropped message.
func (m *Metrics) IncMalformed(topic, reason string) {
	if m != nil {
		m.malformed.with(topic, reason).inc()
	}
}

// IncFirewallSkipped counts a rule, member, address pair or port value the
// firewall left out.
func (m *Metrics) IncFirewallSkipped(kind, reason string) {
	if m != nil {
		m.fwSkipped.with(kind, reason).inc()
	}
}

// IncUpdateDeviceList counts one update_device_list batch.
func (m *Metrics) IncUpdateDeviceList() {
	if m != nil {
		m.updateDevCalls.inc()
	}
}

// IncDeclareFailure counts a declaration the broker refused.
func (m *Metrics) IncDeclareFailure(queue, reason string) {
	if m != nil {
		m.declFailures.with(queue, reason).inc()
	}
}

// SetInSync records whether the agent is in sync; /readyz (and /healthz)
// answers from it.
func (m *Metrics) SetInSync(ok bool) {
	if m == nil {
		return
	}
	m.inSync.Store(ok)
	if ok {
		m.inSyncGauge.set(1)
	} else {
		m.inSyncGauge.set(0)
	}
}

// InSync reports the last value given to SetInSync.
func (m *Metrics) InSync() bool { return m != nil && m.inSync.Load() }

// WatchAMQP exports up() (called at each scrape, so it must not block) as
// the broker connection's state.
func (m *Metrics) WatchAMQP(up func() bool) {
	if m != nil {
		m.amqpUp.with("", "").set(up)
	}
}

// WatchOVSDB exports up() (called at each scrape) as the OVSDB session's
// state.
func (m *Metrics) WatchOVSDB(up func() bool) {
	if m != nil {
		m.ovsdbUp.with("", "").set(up)
	}
}

// WatchOpenFlow exports up() (called at each scrape) as the state of the
// OpenFlow connection to bridge.
func (m *Metrics) WatchOpenFlow(bridge string, up func() bool) {
	if m != nil {
		m.openflowUp.with(bridge, "").set(up)
	}
}
