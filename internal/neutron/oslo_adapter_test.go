package neutron

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/ovsagent/ovsagent/internal/oslo"
)

func TestOsloHandlerBadArgsIsDecodeError(t *testing.T) {
	ep := ConsumerConfig{Handler: nopHandler{}}.agentEndpoint()
	h := osloHandler(ep.Methods["tunnel_update"])
	_, err := h(context.Background(), &oslo.Request{Method: "tunnel_update", Args: json.RawMessage(`{"tunnel_ip": 12}`)})
	var de *oslo.DecodeError
	if !errors.As(err, &de) || de.Reason != oslo.ReasonBadArgs {
		t.Fatalf("bad arguments: got %v, want an oslo.DecodeError with reason bad_args", err)
	}
	boom := errors.New("boom")
	_, err = osloHandler(func(context.Context, *Request) (any, error) { return nil, boom })(context.Background(), &oslo.Request{})
	if err != boom {
		t.Fatalf("other errors pass unchanged: got %v", err)
	}
}

type nopHandler struct{}

func (nopHandler) TunnelUpdate(context.Context, TunnelEvent) error { return nil }
func (nopHandler) TunnelDelete(context.Context, TunnelEvent) error { return nil }
func (nopHandler) FDBAdd(context.Context, FDBEntries) error        { return nil }
func (nopHandler) FDBRemove(context.Context, FDBEntries) error     { return nil }
func (nopHandler) FDBUpdate(context.Context, FDBUpdate) error      { return nil }
