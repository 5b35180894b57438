package main

import (
	"net/http"
	"net/http/pprof"

	"github.com/ovsagent/ovsagent/internal/metrics"
)

// mountPprof serves Go's profiles on the metrics listener ([ovsagent]
// debug_pprof): how the bench finds what the agent's RSS is made of at
// 1,000 ports, and how an operator would look at a live agent.
func mountPprof(ms *metrics.Server) {
	ms.Handle("/debug/pprof/", http.HandlerFunc(pprof.Index))
	ms.Handle("/debug/pprof/cmdline", http.HandlerFunc(pprof.Cmdline))
	ms.Handle("/debug/pprof/profile", http.HandlerFunc(pprof.Profile))
	ms.Handle("/debug/pprof/symbol", http.HandlerFunc(pprof.Symbol))
	ms.Handle("/debug/pprof/trace", http.HandlerFunc(pprof.Trace))
}
