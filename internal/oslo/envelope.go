package oslo

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/google/uuid"
)

// The oslo.messaging 2.0 envelope: {"oslo.version": "2.0", "oslo.message": "<inner JSON>"}.
const (
	EnvelopeVersion = "2.0"
	envVersionKey   = "oslo.version"
	envMessageKey   = "oslo.message"
	contextPrefix   = "_context_"
)

// DefaultMaxMessageBytes bounds every body this package decodes. The largest message
// neutron-server sends an agent (a push or bulk_pull reply of many OVOs) is a few MB.
const DefaultMaxMessageBytes = 8 << 20

// DefaultMaxReplyBytes bounds replies; a dropped reply costs a call timeout and a resync,
// so the bound is only there to stop a runaway body.
const DefaultMaxReplyBytes = 64 << 20

// Reasons a received message is dropped; stable strings, used as metric labels.
const (
	ReasonTooLarge        = "too_large"
	ReasonNotJSON         = "not_json"
	ReasonNotObject       = "not_object"
	ReasonEnvelopeVersion = "envelope_version"
	ReasonBadEnvelope     = "bad_envelope"
	ReasonMissingMethod   = "missing_method"
	ReasonBadArgs         = "bad_args"
	ReasonBadField        = "bad_field"
	ReasonDuplicate       = "duplicate"
	ReasonUnknownMsgID    = "unknown_msg_id"
	// A call whose reply was not sent: MaxReplySenders replies are out already, or
	// its reply queue was found missing before (a forged or long-gone caller).
	ReasonReplyDropped = "reply_dropped"
	// A well-formed message no endpoint takes, or whose arguments a handler
	// rejected by returning a *DecodeError.
	ReasonUnknownMethod      = "unknown_method"
	ReasonUnsupportedVersion = "unsupported_version"
)

// DecodeError is a malformed message; Reason is one of the Reason* constants.
type DecodeError struct {
	Reason string
	Detail string
}

func (e *DecodeError) Error() string {
	return "oslo: malformed message (" + e.Reason + "): " + e.Detail
}

func decodeErr(reason, format string, a ...any) *DecodeError {
	return &DecodeError{Reason: reason, Detail: fmt.Sprintf(format, a...)}
}

// decodeEnvelope decodes the inner message of body into the struct v and returns it. A
// JSON object without both envelope keys is taken as a bare (pre-envelope) message, as
// oslo does. The size is checked before anything is decoded, and nothing but the inner
// message is copied: a key the agent does not read (a _context_* value, an unknown key)
// is scanned, never decoded, however large.
func decodeEnvelope(body []byte, max int, v any) ([]byte, error) {
	if max <= 0 {
		max = DefaultMaxMessageBytes
	}
	if len(body) > max {
		return nil, decodeErr(ReasonTooLarge, "%d bytes > limit %d", len(body), max)
	}
	var env struct {
		Version envString `json:"oslo.version"`
		Message envString `json:"oslo.message"`
	}
	if err := decodeInto(body, &env); err != nil {
		return nil, err
	}
	if !env.Version.set || !env.Message.set {
		return body, decodeInto(body, v)
	}
	if !env.Version.isString {
		return nil, decodeErr(ReasonEnvelopeVersion, "oslo.version is not a string")
	}
	if ok, _ := versionCompatible(EnvelopeVersion, env.Version.s); !ok {
		return nil, decodeErr(ReasonEnvelopeVersion, "oslo.version %q not compatible with %s", env.Version.s, EnvelopeVersion)
	}
	if !env.Message.isString {
		return nil, decodeErr(ReasonBadEnvelope, "oslo.message is not a string")
	}
	inner := env.Message.b
	if err := decodeInto(inner, v); err != nil {
		var de *DecodeError
		if errors.As(err, &de) {
			de.Detail = "inner message: " + de.Detail
		}
		return nil, err
	}
	return inner, nil
}

// envString is an envelope key: whether it was present, and its value if a string.
type envString struct {
	set, isString bool
	s             string // oslo.version
	b             []byte // oslo.message, unescaped into one buffer
}

func (f *envString) UnmarshalJSON(b []byte) error {
	f.set = true
	if len(b) == 0 || b[0] != '"' {
		return nil
	}
	f.isString = true
	if len(b) < 64 {
		f.isString = json.Unmarshal(b, &f.s) == nil
		f.b = []byte(f.s)
		return nil
	}
	// The message: decoding it into a string would cost twice its size (the
	// unescaped bytes, then the string), and []byte(s) a third time.
	f.b = unquoteJSON(b)
	return nil
}

// unquoteJSON unescapes the JSON string literal b, which the decoder has already
// validated, the way encoding/json does (a lone surrogate or an invalid UTF-8 byte
// becomes U+FFFD).
func unquoteJSON(b []byte) []byte {
	b = b[1 : len(b)-1]
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); {
		c := b[i]
		switch {
		case c == '\\':
			i++
			switch b[i] {
			case 'b':
				out = append(out, '\b')
			case 'f':
				out = append(out, '\f')
			case 'n':
				out = append(out, '\n')
			case 'r':
				out = append(out, '\r')
			case 't':
				out = append(out, '\t')
			case 'u':
				r := hex4(b[i+1:])
				i += 4
				if utf16.IsSurrogate(r) {
					r2 := rune(-1)
					if i+6 < len(b) && b[i+1] == '\\' && b[i+2] == 'u' {
						r2 = hex4(b[i+3:])
					}
					if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
						r = dec
						i += 6
					} else {
						r = utf8.RuneError
					}
				}
				out = utf8.AppendRune(out, r)
			default: // " \ /
				out = append(out, b[i])
			}
			i++
		case c < utf8.RuneSelf:
			out = append(out, c)
			i++
		default:
			r, size := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && size == 1 {
				out = utf8.AppendRune(out, utf8.RuneError)
			} else {
				out = append(out, b[i:i+size]...)
			}
			i += size
		}
	}
	return out
}

func hex4(b []byte) rune {
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		default:
			c = c - 'A' + 10
		}
		r = r<<4 | rune(c)
	}
	return r
}

// decodeInto decodes the JSON object b into the struct v, classifying failures.
// encoding/json matches keys case-insensitively; neutron-server sends only lower case,
// and a key in other case reaches nothing a lower-case one could not.
func decodeInto(b []byte, v any) error {
	if firstByte(b) != '{' {
		if !json.Valid(b) {
			return syntaxErr(b)
		}
		return decodeErr(ReasonNotObject, "JSON value is not an object")
	}
	err := json.Unmarshal(b, v) // validates the whole input before decoding
	var syn *json.SyntaxError
	switch {
	case errors.As(err, &syn):
		return decodeErr(ReasonNotJSON, "invalid JSON (%d bytes) at offset %d", len(b), syn.Offset)
	case err != nil:
		return decodeErr(ReasonBadField, "%v", err)
	}
	return nil
}

func syntaxErr(b []byte) error {
	var off int64
	var syn *json.SyntaxError
	if err := json.Unmarshal(b, new(json.RawMessage)); errors.As(err, &syn) {
		off = syn.Offset
	}
	return decodeErr(ReasonNotJSON, "invalid JSON (%d bytes) at offset %d", len(b), off)
}

// encodeEnvelope wraps an inner JSON message into the 2.0 envelope.
func encodeEnvelope(inner []byte) []byte {
	var b bytes.Buffer
	b.Grow(len(inner) + len(inner)/8 + 48)
	b.WriteString(`{"oslo.version": "2.0", "oslo.message": `)
	writeJSONString(&b, inner)
	b.WriteByte('}')
	return b.Bytes()
}

// incoming is a decoded request (call or cast) addressed to an RPC server.
type incoming struct {
	Request
	UniqueID string
	MsgID    string // set for calls
	ReplyQ   string // set for calls
}

// requestWire is the part of a request the agent reads. Every other key (the
// _context_* ones included) is skipped by the decoder without being decoded.
type requestWire struct {
	Method    json.RawMessage `json:"method"`
	Args      json.RawMessage `json:"args"`
	Version   json.RawMessage `json:"version"`
	Namespace json.RawMessage `json:"namespace"`
	UniqueID  json.RawMessage `json:"_unique_id"`
	MsgID     json.RawMessage `json:"_msg_id"`
	ReplyQ    json.RawMessage `json:"_reply_q"`
}

func decodeRequest(body []byte, max int) (*incoming, error) {
	var w requestWire
	inner, err := decodeEnvelope(body, max, &w)
	if err != nil {
		return nil, err
	}
	in := &incoming{}
	if len(w.Method) == 0 || isNull(w.Method) {
		return nil, decodeErr(ReasonMissingMethod, "no method")
	} else if err := json.Unmarshal(w.Method, &in.Method); err != nil || in.Method == "" {
		return nil, decodeErr(ReasonMissingMethod, "method is not a non-empty string")
	}
	if len(w.Args) == 0 || isNull(w.Args) {
		in.Args = json.RawMessage("{}")
	} else if firstByte(w.Args) != '{' {
		return nil, decodeErr(ReasonBadArgs, "args of method %s is not an object", in.Method)
	} else {
		in.Args = w.Args
	}
	for _, f := range []struct {
		key string
		raw json.RawMessage
		dst *string
	}{{"version", w.Version, &in.Version}, {"namespace", w.Namespace, &in.Namespace},
		{"_unique_id", w.UniqueID, &in.UniqueID}, {"_msg_id", w.MsgID, &in.MsgID}, {"_reply_q", w.ReplyQ, &in.ReplyQ}} {
		if err := rawString(f.key, f.raw, f.dst); err != nil {
			return nil, err
		}
	}
	if in.Version == "" {
		in.Version = "1.0"
	}
	if in.MsgID != "" && in.ReplyQ == "" {
		return nil, decodeErr(ReasonBadField, "call %s has _msg_id but no _reply_q", in.Method)
	}
	in.inner = inner
	return in, nil
}

// rawString decodes an optional string field (absent and null leave dst as it is).
func rawString(key string, raw json.RawMessage, dst *string) error {
	if len(raw) == 0 || isNull(raw) {
		return nil
	}
	if err := json.Unmarshal(raw, dst); err != nil {
		return decodeErr(ReasonBadField, "%s is not a string", key)
	}
	return nil
}

// DecodeContext decodes the sender's request context (the _context_* keys, prefix
// removed). It is decoded on demand only: no handler of the agent reads it, and a
// context value can be as large as the message.
func (r *Request) DecodeContext() (map[string]any, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(r.inner, &m); err != nil {
		return nil, fmt.Errorf("oslo: request context: %w", err)
	}
	out := make(map[string]any)
	for k, raw := range m {
		if key, ok := strings.CutPrefix(k, contextPrefix); ok {
			var v any
			if err := json.Unmarshal(raw, &v); err != nil {
				return nil, fmt.Errorf("oslo: request context %s: %w", key, err)
			}
			out[key] = v
		}
	}
	return out, nil
}

func isNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

func firstByte(raw json.RawMessage) byte {
	t := bytes.TrimLeft(raw, " \t\r\n")
	if len(t) == 0 {
		return 0
	}
	return t[0]
}

// ContextField is one key of a serialised oslo request context (without the
// "_context_" prefix). A slice keeps the order neutron's to_dict produces.
type ContextField struct {
	Key   string
	Value any
}

// AdminContext is the context neutron's get_admin_context() serialises, key for key as
// captured from the reference agent on Zed (roles is empty there: the admin flag, not a
// role, makes it admin).
func AdminContext(now time.Time) []ContextField {
	return []ContextField{
		{"user", nil}, {"project_id", nil}, {"system_scope", nil}, {"project", nil},
		{"domain", nil}, {"user_domain", nil}, {"project_domain", nil},
		{"is_admin", true}, {"read_only", false}, {"show_deleted", false},
		{"auth_token", nil}, {"request_id", "req-" + uuid.NewString()},
		{"global_request_id", nil}, {"resource_uuid", nil}, {"roles", []string{}},
		{"user_identity", "- - - - -"}, {"is_admin_project", true}, {"user_id", nil},
		{"tenant_id", nil}, {"timestamp", pyTimestamp(now)}, {"tenant_name", nil},
		{"project_name", nil}, {"user_name", nil},
	}
}

// pyTimestamp renders str(datetime) of a naive UTC datetime, which drops the
// fraction when it is zero.
func pyTimestamp(t time.Time) string {
	t = t.UTC()
	s := t.Format("2006-01-02 15:04:05")
	if us := t.Nanosecond() / 1000; us != 0 {
		s += fmt.Sprintf(".%06d", us)
	}
	return s
}

// outgoing is a request to encode. Args must marshal to a JSON object.
type outgoing struct {
	Method    string
	Args      any
	Version   string
	Namespace string
	MsgID     string // call only
	ReplyQ    string // call only
	UniqueID  string
	Context   []ContextField
}

// encodeRequest produces the enveloped body with keys in oslo's order:
// method, args, namespace, version, _msg_id, _reply_q, _timeout, _unique_id, context.
func encodeRequest(o *outgoing) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(`{"method": `)
	writeJSONString(&b, []byte(o.Method))
	b.WriteString(`, "args": `)
	args, err := marshalArgs(o.Args)
	if err != nil {
		return nil, fmt.Errorf("oslo: encode args of %s: %w", o.Method, err)
	}
	b.Write(args)
	if o.Namespace != "" {
		b.WriteString(`, "namespace": `)
		writeJSONString(&b, []byte(o.Namespace))
	}
	if o.Version != "" {
		b.WriteString(`, "version": `)
		writeJSONString(&b, []byte(o.Version))
	}
	if o.MsgID != "" {
		b.WriteString(`, "_msg_id": `)
		writeJSONString(&b, []byte(o.MsgID))
		b.WriteString(`, "_reply_q": `)
		writeJSONString(&b, []byte(o.ReplyQ))
		b.WriteString(`, "_timeout": null`)
	}
	b.WriteString(`, "_unique_id": `)
	writeJSONString(&b, []byte(o.UniqueID))
	for _, f := range o.Context {
		b.WriteString(`, `)
		writeJSONString(&b, []byte(contextPrefix+f.Key))
		b.WriteString(`: `)
		v, err := marshalJSON(f.Value)
		if err != nil {
			return nil, fmt.Errorf("oslo: encode context %s: %w", f.Key, err)
		}
		b.Write(v)
	}
	b.WriteByte('}')
	return encodeEnvelope(b.Bytes()), nil
}

func marshalArgs(args any) ([]byte, error) {
	if args == nil {
		return []byte("{}"), nil
	}
	raw, err := marshalJSON(args)
	if err != nil {
		return nil, err
	}
	if firstByte(raw) != '{' {
		if isNull(raw) {
			return []byte("{}"), nil
		}
		return nil, errors.New("args must be a JSON object (keyword arguments)")
	}
	return raw, nil
}

// marshalJSON is json.Marshal without HTML escaping (Python's json.dumps does not escape <>&).
func marshalJSON(v any) ([]byte, error) {
	if raw, ok := v.(json.RawMessage); ok {
		if !json.Valid(raw) {
			return nil, errors.New("invalid raw JSON")
		}
		return raw, nil
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

func writeJSONString(b *bytes.Buffer, s []byte) {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(string(s)) // a string always encodes
	b.Truncate(b.Len() - 1)   // Encode's trailing newline
}

// reply is the inner message an RPC server sends back to a caller's reply queue.
type reply struct {
	Result   json.RawMessage
	Failure  *RemoteError
	Ending   bool
	MsgID    string
	UniqueID string
}

func encodeReply(r *reply) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(`{"result": `)
	if len(r.Result) == 0 {
		b.WriteString("null")
	} else {
		b.Write(r.Result)
	}
	b.WriteString(`, "failure": `)
	if r.Failure == nil {
		b.WriteString("null")
	} else {
		f, err := marshalJSON(r.Failure.wire())
		if err != nil {
			return nil, fmt.Errorf("oslo: encode failure: %w", err)
		}
		writeJSONString(&b, f) // failure is a JSON string holding JSON
	}
	b.WriteString(`, "ending": `)
	b.WriteString(strconv.FormatBool(r.Ending))
	b.WriteString(`, "_msg_id": `)
	writeJSONString(&b, []byte(r.MsgID))
	b.WriteString(`, "_unique_id": `)
	writeJSONString(&b, []byte(r.UniqueID))
	b.WriteByte('}')
	return encodeEnvelope(b.Bytes()), nil
}

// replyWire is the part of a reply the agent reads.
type replyWire struct {
	Result   json.RawMessage `json:"result"`
	Failure  json.RawMessage `json:"failure"`
	Ending   json.RawMessage `json:"ending"`
	MsgID    json.RawMessage `json:"_msg_id"`
	UniqueID json.RawMessage `json:"_unique_id"`
}

func decodeReply(body []byte, max int) (*reply, error) {
	var w replyWire
	if _, err := decodeEnvelope(body, max, &w); err != nil {
		return nil, err
	}
	r := &reply{}
	if err := rawString("_msg_id", w.MsgID, &r.MsgID); err != nil {
		return nil, err
	}
	if r.MsgID == "" {
		return nil, decodeErr(ReasonBadField, "reply without _msg_id")
	}
	if err := rawString("_unique_id", w.UniqueID, &r.UniqueID); err != nil {
		return nil, err
	}
	if len(w.Result) > 0 && !isNull(w.Result) {
		r.Result = w.Result
	}
	if len(w.Ending) > 0 && !isNull(w.Ending) {
		if err := json.Unmarshal(w.Ending, &r.Ending); err != nil {
			return nil, decodeErr(ReasonBadField, "ending is not a bool")
		}
	}
	if len(w.Failure) > 0 && !isNull(w.Failure) {
		f, err := decodeFailure(w.Failure)
		if err != nil {
			return nil, err
		}
		r.Failure = f
	}
	return r, nil
}

// decodeFailure accepts the JSON string oslo sends, and a bare object for leniency.
func decodeFailure(raw json.RawMessage) (*RemoteError, error) {
	if firstByte(raw) == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, decodeErr(ReasonBadField, "failure string")
		}
		raw = json.RawMessage(s)
	}
	var w remoteErrorWire
	if err := json.Unmarshal(raw, &w); err != nil {
		return nil, decodeErr(ReasonBadField, "failure is not a serialised exception")
	}
	e := &RemoteError{Class: w.Class, Module: w.Module, Message: w.Message, Tb: w.Tb, Args: w.Args, Kwargs: w.Kwargs}
	// Mirrors oslo: a re-raised remote exception keeps its original name.
	if strings.HasSuffix(e.Class, "_Remote") && strings.HasSuffix(e.Module, "_Remote") {
		e.Class = strings.TrimSuffix(e.Class, "_Remote")
		e.Module = strings.TrimSuffix(e.Module, "_Remote")
	}
	return e, nil
}

// versionCompatible is oslo's version_is_compatible: same major, requested minor (and
// revision at equal minor) not above the implemented one.
func versionCompatible(imp, req string) (bool, error) {
	if imp == "" {
		return true, nil
	}
	iv, err := parseVersion(imp)
	if err != nil {
		return false, err
	}
	rv, err := parseVersion(req)
	if err != nil {
		return false, err
	}
	switch {
	case rv[0] != iv[0]:
		return false, nil
	case rv[1] > iv[1]:
		return false, nil
	case rv[1] == iv[1] && rv[2] > iv[2]:
		return false, nil
	}
	return true, nil
}

func parseVersion(s string) ([3]int, error) {
	var v [3]int
	parts := strings.Split(s, ".")
	if len(parts) < 2 || len(parts) > 3 {
		return v, fmt.Errorf("bad version %q", s)
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return v, fmt.Errorf("bad version %q", s)
		}
		v[i] = n
	}
	return v, nil
}
