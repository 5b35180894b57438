package neutron

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/ovsagent/ovsagent/internal/oslo"
)

// Oslo adapts an *oslo.Transport to RPC and Server.
type Oslo struct{ T *oslo.Transport }

var (
	_ RPC    = Oslo{}
	_ Server = Oslo{}
)

func toOsloTarget(t Target) oslo.Target {
	return oslo.Target{Topic: t.Topic, Server: t.Server, Version: t.Version, Namespace: t.Namespace, Fanout: t.Fanout}
}

// Call implements RPC. An explicit timeout bypasses oslo's per-method backoff, as a
// neutron-lib client prepared with a timeout does.
func (o Oslo) Call(ctx context.Context, tgt Target, method string, args any, timeout time.Duration) (json.RawMessage, error) {
	var opts []oslo.CallOption
	if timeout > 0 {
		opts = append(opts, oslo.WithTimeout(timeout))
	}
	return o.T.Call(ctx, toOsloTarget(tgt), method, args, opts...)
}

// Cast implements RPC.
func (o Oslo) Cast(ctx context.Context, tgt Target, method string, args any) error {
	return o.T.Cast(ctx, toOsloTarget(tgt), method, args)
}

// Serve implements Server.
func (o Oslo) Serve(topic string, eps ...Endpoint) error {
	oeps := make([]oslo.Endpoint, len(eps))
	for i, ep := range eps {
		methods := make(map[string]oslo.Handler, len(ep.Methods))
		for name, h := range ep.Methods {
			methods[name] = osloHandler(h)
		}
		oeps[i] = oslo.Endpoint{Namespace: ep.Namespace, Version: ep.Version, Methods: methods}
	}
	return o.T.Serve(topic, oeps...)
}

// osloHandler adapts a Handler. Arguments that do not decode (ErrBadArgs) become an
// *oslo.DecodeError, which oslo logs once and counts as a dropped message (bad_args).
func osloHandler(h Handler) oslo.Handler {
	return func(ctx context.Context, req *oslo.Request) (any, error) {
		res, err := h(ctx, &Request{Method: req.Method, Version: req.Version, Namespace: req.Namespace, Args: req.Args})
		if errors.Is(err, ErrBadArgs) {
			return res, &oslo.DecodeError{Reason: oslo.ReasonBadArgs, Detail: err.Error()}
		}
		return res, err
	}
}
