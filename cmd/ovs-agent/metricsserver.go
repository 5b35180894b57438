package main

import (
	"fmt"
	"net/http"

	"github.com/ovsagent/ovsagent/internal/agent"
	"github.com/ovsagent/ovsagent/internal/config"
	"github.com/ovsagent/ovsagent/internal/metrics"
	"github.com/ovsagent/ovsagent/internal/oslo"
	"github.com/ovsagent/ovsagent/internal/ovsdb"
)

// listenMetrics binds metrics_listen with /metrics and /healthz, and mounts
// only what the configuration asks for beyond them: /explain/ (every
// tenant's port details, unauthenticated) with explain_endpoint, Go's
// profiles with debug_pprof (config refuses those beyond loopback unless
// forced).
func listenMetrics(cfg *config.Config, m *metrics.Metrics, explain http.Handler) (*metrics.Server, error) {
	ms, err := metrics.Listen(cfg.OVSAgent.MetricsListen, m)
	if err != nil {
		return nil, fmt.Errorf("ovsagent.metrics_listen: %w", err)
	}
	if cfg.OVSAgent.ExplainEndpoint {
		ms.Handle("/explain/", explain)
	}
	if cfg.OVSAgent.DebugPprof {
		mountPprof(ms)
	}
	return ms, nil
}

// watchConnections exports the state of the broker, OVSDB and each
// bridge's OpenFlow connection, read at every scrape.
func watchConnections(m *metrics.Metrics, tr *oslo.Transport, oc *ovsdb.Client, of *agent.OFBridges, bridges []string) {
	m.WatchAMQP(tr.Connected)
	m.WatchOVSDB(oc.Connected)
	for _, br := range bridges {
		m.WatchOpenFlow(br, func() bool { return of.Connected(br) })
	}
}
