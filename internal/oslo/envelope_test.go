package oslo

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"
)

// capturesDir holds the real messages between neutron-server 21.0.0 (Zed)
// and the reference agent, decoded (one JSON per method), so the test needs
// nothing beside the repository.
func capturesDir() string { return filepath.Join("testdata", "zed", "messages") }

type captureFile struct {
	Method         string           `json:"method"`
	Examples       []captureExample `json:"examples"`
	DeliverExample []captureExample `json:"deliver_example"`
}

type captureExample struct {
	WireBody json.RawMessage `json:"wire_body"`
	Decoded  map[string]any  `json:"oslo_message_decoded"`
	Reply    []struct {
		WireBody json.RawMessage `json:"wire_body"`
		Decoded  map[string]any  `json:"oslo_message_decoded"`
	} `json:"reply"`
}

func loadCaptures(t testing.TB) map[string]captureFile {
	t.Helper()
	dir := capturesDir()
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no captures in %s (err %v)", dir, err)
	}
	out := make(map[string]captureFile)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var c captureFile
		if err := json.Unmarshal(b, &c); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out[filepath.Base(f)] = c
	}
	return out
}

// innerKeys returns the top-level keys of the inner message in wire order.
func innerKeys(t *testing.T, body []byte) []string {
	t.Helper()
	var env map[string]string
	if err := json.Unmarshal(body, &env); err != nil {
		t.Fatalf("envelope: %v", err)
	}
	if env["oslo.version"] != "2.0" {
		t.Fatalf("oslo.version = %q", env["oslo.version"])
	}
	dec := json.NewDecoder(strings.NewReader(env["oslo.message"]))
	if _, err := dec.Token(); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

func innerMap(t *testing.T, body []byte) map[string]any {
	t.Helper()
	var env map[string]string
	if err := json.Unmarshal(body, &env); err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(env["oslo.message"]), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

var (
	reqIDRe = regexp.MustCompile(`^req-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
	tsRe    = regexp.MustCompile(`^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d{6})?$`)
	hexRe   = regexp.MustCompile(`^[0-9a-f]{32}$`)
)

// normalise blanks the per-message values (uuids, timestamps) after checking their shape.
func normalise(t *testing.T, m map[string]any) map[string]any {
	t.Helper()
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	check := func(key string, re *regexp.Regexp) {
		if v, ok := out[key]; ok {
			s, _ := v.(string)
			if !re.MatchString(s) {
				t.Errorf("%s = %v does not match %s", key, v, re)
			}
			out[key] = "X"
		}
	}
	check("_unique_id", hexRe)
	check("_msg_id", hexRe)
	check("_context_request_id", reqIDRe)
	check("_context_timestamp", tsRe)
	if v, ok := out["_reply_q"]; ok {
		if s, _ := v.(string); !strings.HasPrefix(s, "reply_") || !hexRe.MatchString(s[6:]) {
			t.Errorf("_reply_q = %v", v)
		}
		out["_reply_q"] = "X"
	}
	return out
}

// TestGoldenCaptures decodes every captured message and reply, and re-encodes each from
// scratch (fresh admin context, ids) to the same keys, order and values as the reference.
func TestGoldenCaptures(t *testing.T) {
	n := 0
	for name, c := range loadCaptures(t) {
		for i, ex := range append(append([]captureExample(nil), c.Examples...), c.DeliverExample...) {
			n++
			in, err := decodeRequest(ex.WireBody, 0)
			if err != nil {
				t.Fatalf("%s[%d]: decode: %v", name, i, err)
			}
			if in.Method != ex.Decoded["method"] || in.Version != ex.Decoded["version"] {
				t.Errorf("%s[%d]: method/version %s %s", name, i, in.Method, in.Version)
			}
			if id, _ := ex.Decoded["_msg_id"].(string); in.MsgID != id {
				t.Errorf("%s[%d]: msg_id %q want %q", name, i, in.MsgID, id)
			}
			if c, err := in.DecodeContext(); err != nil || c["is_admin"] != true || len(c) != 23 {
				t.Errorf("%s[%d]: context %v %v", name, i, c, err)
			}
			var wantArgs, gotArgs any
			_ = json.Unmarshal(in.Args, &gotArgs)
			wantArgs = ex.Decoded["args"]
			if !reflect.DeepEqual(gotArgs, wantArgs) {
				t.Errorf("%s[%d]: args differ", name, i)
			}

			out := &outgoing{Method: in.Method, Args: in.Args, Version: in.Version, UniqueID: newID(),
				Context: AdminContext(time.Now())}
			if in.MsgID != "" {
				out.MsgID, out.ReplyQ = newID(), "reply_"+newID()
			}
			body, err := encodeRequest(out)
			if err != nil {
				t.Fatalf("%s[%d]: encode: %v", name, i, err)
			}
			if got, want := innerKeys(t, body), innerKeys(t, ex.WireBody); !reflect.DeepEqual(got, want) {
				t.Errorf("%s[%d]: key order\n got %v\nwant %v", name, i, got, want)
			}
			got, want := normalise(t, innerMap(t, body)), normalise(t, ex.Decoded)
			if !reflect.DeepEqual(got, want) {
				for k := range want {
					if !reflect.DeepEqual(got[k], want[k]) {
						t.Errorf("%s[%d]: %s = %v, want %v", name, i, k, got[k], want[k])
					}
				}
			}

			for j, rep := range ex.Reply {
				r, err := decodeReply(rep.WireBody, 0)
				if err != nil {
					t.Fatalf("%s[%d] reply %d: %v", name, i, j, err)
				}
				if !r.Ending || r.MsgID != rep.Decoded["_msg_id"] {
					t.Errorf("%s[%d] reply %d: %+v", name, i, j, r)
				}
				r.UniqueID = newID()
				body, err := encodeReply(r)
				if err != nil {
					t.Fatal(err)
				}
				if got, want := innerKeys(t, body), innerKeys(t, rep.WireBody); !reflect.DeepEqual(got, want) {
					t.Errorf("%s[%d] reply %d: keys %v want %v", name, i, j, got, want)
				}
				if got, want := normalise(t, innerMap(t, body)), normalise(t, rep.Decoded); !reflect.DeepEqual(got, want) {
					t.Errorf("%s[%d] reply %d: got %v want %v", name, i, j, got, want)
				}
			}
		}
	}
	if n < 24 {
		t.Fatalf("only %d captured messages checked", n)
	}
	t.Logf("%d captured messages round-tripped", n)
}

func TestRemoteErrorRoundTrip(t *testing.T) {
	r := &reply{Ending: true, MsgID: newID(), UniqueID: newID(), Failure: noSuchMethod("frob")}
	body, err := encodeReply(r)
	if err != nil {
		t.Fatal(err)
	}
	m := innerMap(t, body)
	s, ok := m["failure"].(string)
	if !ok {
		t.Fatalf("failure must be a JSON string, got %T", m["failure"])
	}
	var f map[string]any
	if err := json.Unmarshal([]byte(s), &f); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"class", "module", "message", "tb", "args", "kwargs"} {
		if _, ok := f[k]; !ok {
			t.Errorf("failure lacks %s", k)
		}
	}
	got, err := decodeReply(body, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !IsNoSuchMethod(got.Failure) || got.Failure.Module != "oslo_messaging.rpc.dispatcher" ||
		got.Failure.Message != "Endpoint does not support RPC method frob" {
		t.Fatalf("failure %+v", got.Failure)
	}
	// A re-raised remote exception loses its _Remote suffix.
	raw := json.RawMessage(`"{\"class\": \"PortNotFound_Remote\", \"module\": \"neutron_lib.exceptions_Remote\", \"message\": \"m\", \"tb\": [], \"args\": [], \"kwargs\": {}}"`)
	re, err := decodeFailure(raw)
	if err != nil || re.Class != "PortNotFound" || re.Module != "neutron_lib.exceptions" {
		t.Fatalf("%+v %v", re, err)
	}
}

func TestDecodeMalformed(t *testing.T) {
	big := bytes.Repeat([]byte("x"), 10<<20)
	cases := map[string][]byte{
		ReasonNotJSON:         []byte("not json {"),
		ReasonNotObject:       []byte(`[1,2]`),
		ReasonEnvelopeVersion: []byte(`{"oslo.version": "3.0", "oslo.message": "{\"method\": \"m\"}"}`),
		ReasonBadEnvelope:     []byte(`{"oslo.version": "2.0", "oslo.message": 5}`),
		ReasonMissingMethod:   []byte(`{"oslo.version": "2.0", "oslo.message": "{\"args\": {}}"}`),
		ReasonBadArgs:         []byte(`{"oslo.version": "2.0", "oslo.message": "{\"method\": \"m\", \"args\": [1]}"}`),
		ReasonTooLarge:        big,
		ReasonBadField:        []byte(`{"method": "m", "version": 1.1}`),
	}
	for want, body := range cases {
		_, err := decodeRequest(body, 0)
		if got := reasonOf(err); err == nil || got != want {
			t.Errorf("%s: got %v (%s)", want, err, got)
		}
	}
	// Inner message that is not JSON.
	if _, err := decodeRequest([]byte(`{"oslo.version": "2.0", "oslo.message": "{nope"}`), 0); reasonOf(err) != ReasonNotJSON {
		t.Errorf("inner not json: %v", err)
	}
	// A bare (un-enveloped) message is accepted, and 2.x minor bumps are refused as oslo does.
	in, err := decodeRequest([]byte(`{"method": "m", "args": {"a": 1}}`), 0)
	if err != nil || in.Method != "m" || in.Version != "1.0" {
		t.Fatalf("bare: %+v %v", in, err)
	}
	if _, err := decodeRequest([]byte(`{"oslo.version": "2.1", "oslo.message": "{\"method\": \"m\"}"}`), 0); reasonOf(err) != ReasonEnvelopeVersion {
		t.Errorf("2.1: %v", err)
	}
}

func TestVersionCompatible(t *testing.T) {
	cases := []struct {
		imp, req string
		ok       bool
	}{
		{"1.7", "1.0", true}, {"1.7", "1.7", true}, {"1.7", "1.8", false}, {"1.7", "2.0", false},
		{"2.0", "1.9", false}, {"1.1", "1.1.1", false}, {"1.1.2", "1.1.1", true}, {"1.1", "x", false},
	}
	for _, c := range cases {
		if ok, _ := versionCompatible(c.imp, c.req); ok != c.ok {
			t.Errorf("versionCompatible(%s, %s) = %v", c.imp, c.req, ok)
		}
	}
}

func TestPyTimestamp(t *testing.T) {
	ts := time.Date(2026, 12, 2, 13, 59, 40, 121723000, time.UTC)
	if got := pyTimestamp(ts); got != "2026-12-02 13:59:40.121723" {
		t.Error(got)
	}
	if got := pyTimestamp(ts.Truncate(time.Second)); got != "2026-12-02 13:59:40" {
		t.Error(got)
	}
}

func FuzzEnvelope(f *testing.F) {
	for _, c := range loadCaptures(f) {
		for _, ex := range append(c.Examples, c.DeliverExample...) {
			f.Add([]byte(ex.WireBody))
			for _, r := range ex.Reply {
				f.Add([]byte(r.WireBody))
			}
		}
	}
	f.Add([]byte(`{"oslo.version": "2.0", "oslo.message": "{\"method\": \"m\", \"args\": null}"}`))
	f.Add([]byte(`{"oslo.version": "2", "oslo.message": "{}"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		if in, err := decodeRequest(body, 1<<20); err == nil {
			out, err := encodeRequest(&outgoing{Method: in.Method, Args: in.Args, Version: in.Version,
				Namespace: in.Namespace, MsgID: in.MsgID, ReplyQ: in.ReplyQ, UniqueID: in.UniqueID})
			if err != nil {
				t.Fatalf("re-encode of a decoded request: %v", err)
			}
			again, err := decodeRequest(out, 0)
			if err != nil || again.Method != in.Method || again.Version != in.Version || again.MsgID != in.MsgID {
				t.Fatalf("round trip: %+v vs %+v (%v)", again, in, err)
			}
		}
		if r, err := decodeReply(body, 1<<20); err == nil {
			if _, err := encodeReply(r); err != nil {
				t.Fatalf("re-encode reply: %v", err)
			}
		}
	})
}

func BenchmarkDecodeEnvelope(b *testing.B) {
	var body []byte
	for name, c := range loadCaptures(b) {
		if strings.Contains(name, "Port-1.7_fanout__push__updated") {
			body = c.Examples[0].WireBody
		}
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decodeRequest(body, 0); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodeRequest(b *testing.B) {
	args := map[string]any{"devices_up": []string{"a", "b"}, "devices_down": []string{}, "agent_id": "ovs-agent-hv1", "host": "hv1", "refresh_tunnels": true}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := encodeRequest(&outgoing{Method: "update_device_list", Args: args, Version: "1.9", MsgID: newID(),
			ReplyQ: "reply_x", UniqueID: newID(), Context: AdminContext(time.Now())}); err != nil {
			b.Fatal(err)
		}
	}
}
