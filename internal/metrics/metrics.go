// Package metrics holds ovsagent's Prometheus metrics and the HTTP endpoint
// that serves them with /healthz.
//
// Every metric lives on the Metrics value's own registry (never the global
// one) so tests and several agents in one process do not collide. All
// methods are safe on a nil *Metrics, which records nothing: code that has
// no metrics (unit tests, one-shot subcommands) passes nil.
package metrics

import (
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Metrics is the agent's metric set.
type Metrics struct {
	Registry *prometheus.Registry

	portsWired     prometheus.Gauge
	portWiring     prometheus.Histogram
	agentBatch     prometheus.Histogram
	wiringStage    *prometheus.HistogramVec
	rpcDuration    *prometheus.HistogramVec
	rpcErrors      *prometheus.CounterVec
	flows          *prometheus.GaugeVec
	bundleApply    *prometheus.HistogramVec
	resyncs        *prometheus.CounterVec
	loopDuration   prometheus.Histogram
	malformed      *prometheus.CounterVec
	inSyncGauge    prometheus.Gauge
	updateDevCalls prometheus.Counter

	inSync atomic.Bool
}

// Latency buckets: the agent's own share is milliseconds, the server's
// floor a few hundred ms, the reference agent seconds.
var latencyBuckets = []float64{.001, .0025, .005, .01, .02, .05, .1, .2, .3, .5, .75, 1, 1.5, 2.5, 5, 10, 30}

// New creates the metric set on a fresh registry (with the Go and process
// collectors).
func New() *Metrics {
	r := prometheus.NewRegistry()
	m := &Metrics{
		Registry: r,
		portsWired: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ovsagent_ports_wired",
			Help: "VM ports on br-int wired and reported up.",
		}),
		portWiring: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "ovsagent_port_wiring_seconds",
			Help:    "From the OVSDB event of a port to the server's reply to update_device_list (port ACTIVE).",
			Buckets: latencyBuckets,
		}),
		agentBatch: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "ovsagent_agent_batch_seconds",
			Help:    "The agent's own share of wiring a port: from the moment it has the port's ofport and details to the port wired and its report ready to send, less the time the batch waited on the switch (the dataplane stage).",
			Buckets: latencyBuckets,
		}),
		wiringStage: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "ovsagent_port_wiring_stage_seconds",
			Help: "Where a port's wiring time goes, by stage: vswitchd (OVSDB event to ofport), server_data (ofport to the port's details), " +
				"agent (details to wired, less dataplane), dataplane (the wiring batch's OVSDB tag transaction and OpenFlow bundles, until the switch confirmed them), " +
				"report_queue (wired to update_device_list sent: a call slot), server (sent to the server's reply).",
			Buckets: latencyBuckets,
		}, []string{"stage"}),
		rpcDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "ovsagent_rpc_duration_seconds",
			Help:    "Duration of RPC calls to neutron-server, by method.",
			Buckets: latencyBuckets,
		}, []string{"method"}),
		rpcErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ovsagent_rpc_errors_total",
			Help: "RPC calls to neutron-server that failed, by method.",
		}, []string{"method"}),
		flows: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "ovsagent_flows",
			Help: "Flows the agent owns, by bridge and table.",
		}, []string{"bridge", "table"}),
		bundleApply: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "ovsagent_bundle_apply_seconds",
			Help:    "Time to apply one OpenFlow bundle, by bridge.",
			Buckets: latencyBuckets,
		}, []string{"bridge"}),
		resyncs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ovsagent_resyncs_total",
			Help: "Full resyncs, by reason.",
		}, []string{"reason"}),
		loopDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "ovsagent_loop_duration_seconds",
			Help:    "Duration of one batch of the agent loop.",
			Buckets: latencyBuckets,
		}),
		malformed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ovsagent_malformed_messages_total",
			Help: "Messages dropped because they could not be understood, by topic and reason.",
		}, []string{"topic", "reason"}),
		inSyncGauge: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ovsagent_in_sync",
			Help: "1 when the dataplane matches the agent's state and the server knows every port's status.",
		}),
		updateDevCalls: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ovsagent_update_device_list_calls_total",
			Help: "update_device_list batches sent (one per loop batch that had ports to report).",
		}),
	}
	r.MustRegister(m.portsWired, m.portWiring, m.agentBatch, m.wiringStage, m.rpcDuration, m.rpcErrors, m.flows,
		m.bundleApply, m.resyncs, m.loopDuration, m.malformed, m.inSyncGauge, m.updateDevCalls,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// SetPortsWired sets the number of wired ports.
func (m *Metrics) SetPortsWired(n int) {
	if m != nil {
		m.portsWired.Set(float64(n))
	}
}

// ObservePortWiring records one port's event → ACTIVE latency.
func (m *Metrics) ObservePortWiring(d time.Duration) {
	if m != nil {
		m.portWiring.Observe(d.Seconds())
	}
}

// ObserveAgentBatch records the agent's own share of wiring one port.
func (m *Metrics) ObserveAgentBatch(d time.Duration) {
	if m != nil {
		m.agentBatch.Observe(d.Seconds())
	}
}

// ObserveWiringStage records the time one port spent in one stage of its
// wiring (see the metric's help for the stages).
func (m *Metrics) ObserveWiringStage(stage string, d time.Duration) {
	if m != nil {
		m.wiringStage.WithLabelValues(stage).Observe(d.Seconds())
	}
}

// ObserveRPC records one RPC call; err non-nil counts an error.
func (m *Metrics) ObserveRPC(method string, d time.Duration, err error) {
	if m == nil {
		return
	}
	m.rpcDuration.WithLabelValues(method).Observe(d.Seconds())
	if err != nil {
		m.rpcErrors.WithLabelValues(method).Inc()
	}
}

// SetFlows sets the number of flows the agent owns on bridge, by table; the
// bridge's tables absent from counts are set to 0.
func (m *Metrics) SetFlows(bridge string, counts map[uint8]int) {
	if m == nil {
		return
	}
	m.flows.DeletePartialMatch(prometheus.Labels{"bridge": bridge})
	for t, n := range counts {
		m.flows.WithLabelValues(bridge, strconv.Itoa(int(t))).Set(float64(n))
	}
}

// ObserveBundle records one bundle apply on bridge.
func (m *Metrics) ObserveBundle(bridge string, d time.Duration) {
	if m != nil {
		m.bundleApply.WithLabelValues(bridge).Observe(d.Seconds())
	}
}

// IncResync counts a full resync.
func (m *Metrics) IncResync(reason string) {
	if m != nil {
		m.resyncs.WithLabelValues(reason).Inc()
	}
}

// ObserveLoop records one loop batch.
func (m *Metrics) ObserveLoop(d time.Duration) {
	if m != nil {
		m.loopDuration.Observe(d.Seconds())
	}
}

// IncMalformed counts a dropped message.
func (m *Metrics) IncMalformed(topic, reason string) {
	if m != nil {
		m.malformed.WithLabelValues(topic, reason).Inc()
	}
}

// IncUpdateDeviceList counts one update_device_list batch.
func (m *Metrics) IncUpdateDeviceList() {
	if m != nil {
		m.updateDevCalls.Inc()
	}
}

// SetInSync records whether the agent is in sync; /healthz answers from it.
func (m *Metrics) SetInSync(ok bool) {
	if m == nil {
		return
	}
	m.inSync.Store(ok)
	if ok {
		m.inSyncGauge.Set(1)
	} else {
		m.inSyncGauge.Set(0)
	}
}

// InSync reports the last value given to SetInSync.
func (m *Metrics) InSync() bool { return m != nil && m.inSync.Load() }
