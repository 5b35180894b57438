package neutron

import (
	"context"
	"encoding/json"
	"time"
)

// The slice of oslo.messaging this package needs. Defined here (not imported) so that
// the typed APIs are tested with an in-memory server and the oslo transport adapts to it
// in one place (oslo_adapter.go).

// Target addresses a call or cast: exchange "neutron", routing key Topic[.Server], or the
// Topic_fanout exchange when Fanout.
type Target struct {
	Topic, Server, Version, Namespace string
	Fanout                            bool
}

// RPC sends calls and casts. A zero timeout means the transport's default
// (rpc_response_timeout).
type RPC interface {
	Call(ctx context.Context, tgt Target, method string, args any, timeout time.Duration) (json.RawMessage, error)
	Cast(ctx context.Context, tgt Target, method string, args any) error
}

// Request is a received RPC request.
type Request struct {
	Method, Version, Namespace string
	Args                       json.RawMessage
}

// Handler serves one method. An error is logged and counted by the transport (and
// returned as a failure for calls); it affects nothing else.
type Handler func(ctx context.Context, req *Request) (any, error)

// Endpoint is a set of methods under one namespace and version, dispatched like oslo
// (same major, endpoint minor >= requested).
type Endpoint struct {
	Namespace, Version string
	Methods            map[string]Handler
}

// Server consumes a topic (queues <topic>, <topic>.<host> and a fanout queue).
type Server interface {
	Serve(topic string, eps ...Endpoint) error
}
