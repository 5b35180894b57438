package oslo

import (
	"errors"
	"fmt"
)

// RemoteError is an exception raised by the remote end of a call, as oslo serialises it
// into the reply's "failure" field.
type RemoteError struct {
	Class   string
	Module  string
	Message string
	Tb      []string
	Args    []any
	Kwargs  map[string]any
}

func (e *RemoteError) Error() string {
	name := e.Class
	if e.Module != "" {
		name = e.Module + "." + e.Class
	}
	return fmt.Sprintf("oslo: remote error %s: %s", name, e.Message)
}

type remoteErrorWire struct {
	Class   string         `json:"class"`
	Module  string         `json:"module"`
	Message string         `json:"message"`
	Tb      []string       `json:"tb"`
	Args    []any          `json:"args"`
	Kwargs  map[string]any `json:"kwargs"`
}

func (e *RemoteError) wire() remoteErrorWire {
	w := remoteErrorWire{Class: e.Class, Module: e.Module, Message: e.Message, Tb: e.Tb, Args: e.Args, Kwargs: e.Kwargs}
	if w.Tb == nil {
		w.Tb = []string{}
	}
	if w.Args == nil {
		w.Args = []any{e.Message}
	}
	if w.Kwargs == nil {
		w.Kwargs = map[string]any{}
	}
	return w
}

const dispatcherModule = "oslo_messaging.rpc.dispatcher"

// IsNoSuchMethod and IsUnsupportedVersion recognise oslo's dispatcher failures.
func IsNoSuchMethod(err error) bool       { return isRemoteClass(err, "NoSuchMethod") }
func IsUnsupportedVersion(err error) bool { return isRemoteClass(err, "UnsupportedVersion") }

func isRemoteClass(err error, class string) bool {
	var re *RemoteError
	return errors.As(err, &re) && re.Class == class
}

func noSuchMethod(method string) *RemoteError {
	msg := "Endpoint does not support RPC method " + method
	return &RemoteError{Class: "NoSuchMethod", Module: dispatcherModule, Message: msg,
		Tb: []string{"oslo_messaging.rpc.dispatcher.NoSuchMethod: " + msg + "\n"}, Args: []any{msg}}
}

func unsupportedVersion(version, method string) *RemoteError {
	msg := "Endpoint does not support RPC version " + version + ". Attempted method: " + method
	return &RemoteError{Class: "UnsupportedVersion", Module: dispatcherModule, Message: msg,
		Tb: []string{"oslo_messaging.rpc.dispatcher.UnsupportedVersion: " + msg + "\n"}, Args: []any{msg}}
}

// toRemoteError turns a handler's error into what goes on the wire. A *RemoteError is sent
// as is; anything else becomes a builtins RuntimeError, which a Python caller re-raises.
func toRemoteError(err error) *RemoteError {
	var re *RemoteError
	if errors.As(err, &re) {
		return re
	}
	msg := err.Error()
	return &RemoteError{Class: "RuntimeError", Module: "builtins", Message: msg,
		Tb: []string{"RuntimeError: " + msg + "\n"}, Args: []any{msg}}
}

// ErrTimeout is wrapped by the error a Call returns when no reply arrived in time
// (oslo's MessagingTimeout).
var ErrTimeout = errors.New("oslo: messaging timeout")

// ErrClosed is returned by operations on a closed Transport.
var ErrClosed = errors.New("oslo: transport closed")

// TimeoutError is a call that got no reply within Timeout.
type TimeoutError struct {
	Method  string
	Topic   string
	MsgID   string
	Timeout string
}

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("oslo: timed out after %s waiting for reply to %s on %s (msg_id %s)", e.Timeout, e.Method, e.Topic, e.MsgID)
}

func (e *TimeoutError) Unwrap() error { return ErrTimeout }
