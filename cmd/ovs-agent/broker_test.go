//go:build integration

package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ovsagent/ovsagent/internal/config"
	"github.com/ovsagent/ovsagent/internal/oslo"
	"github.com/ovsagent/ovsagent/internal/testing/ovstest"
	"github.com/ovsagent/ovsagent/internal/testing/tlstest"
)

func requireRabbit(t *testing.T) {
	t.Helper()
	c, err := net.DialTimeout("tcp", "127.0.0.1:5672", 2*time.Second)
	if err != nil {
		t.Fatalf("RabbitMQ is required on 127.0.0.1:5672: %v", err)
	}
	c.Close()
}

// loadConf writes body to a file and loads it as the agent does.
func loadConf(t *testing.T, body string) *config.Config {
	t.Helper()
	p := filepath.Join(t.TempDir(), "agent.conf")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(config.Files(p), config.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func waitCond(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return cond()
}

// TestBrokerTLSDecision: the TLS decision as oslo.messaging makes it, against
// a TLS relay to the RabbitMQ on 127.0.0.1:5672. TLS is asked for in the
// transport_url query (?ssl=1); the chain is verified (ssl_ca_file, else the
// system CAs), the name only with ssl_enforce_hostname_verification.
func TestBrokerTLSDecision(t *testing.T) {
	requireRabbit(t)
	dir := t.TempDir()
	ca, other := tlstest.NewCA(t, "broker-ca"), tlstest.NewCA(t, "other-ca")
	caFile := ca.WritePEM(t, dir)
	// a certificate that names another host than the one dialled (127.0.0.1)
	elsewhere := tlstest.NewRelay(t, ca.Issue(t, []string{"elsewhere.example"}, nil), "127.0.0.1:5672")
	named := tlstest.NewRelay(t, ca.Issue(t, nil, []net.IP{net.ParseIP("127.0.0.1")}), "127.0.0.1:5672")
	wrongCA := tlstest.NewRelay(t, other.Issue(t, nil, []net.IP{net.ParseIP("127.0.0.1")}), "127.0.0.1:5672")
	cases := []struct {
		name    string
		relay   *tlstest.Relay
		query   string
		rabbit  string
		connect bool
	}{
		{"query ssl=1, name not checked by default", elsewhere, "?ssl=1", "ssl_ca_file = " + caFile, true},
		{"query ssl=true with ssl_ca_file in the query", elsewhere, "?ssl=true&ssl_ca_file=" + caFile, "", true},
		{"name checked when enforced: wrong name", elsewhere, "?ssl=1", "ssl_ca_file = " + caFile + "\nssl_enforce_hostname_verification = True", false},
		{"name checked when enforced: right name", named, "", "ssl = True\nssl_ca_file = " + caFile + "\nssl_enforce_hostname_verification = True\nssl_version = TLSv1_2", true},
		{"another CA: chain refused", wrongCA, "?ssl=1", "ssl_ca_file = " + caFile, false},
		{"no ssl_ca_file: system CAs, the test CA is not one", named, "?ssl=1", "", false},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := loadConf(t, fmt.Sprintf("[DEFAULT]\nhost = tls-%d\ntransport_url = rabbit://guest:guest@127.0.0.1:%d/%s\n[oslo_messaging_rabbit]\n%s\n",
				i, c.relay.Port, c.query, c.rabbit))
			hs, refused := c.relay.Handshakes.Load(), c.relay.Refused.Load()
			tr, err := dialBroker(context.Background(), cfg, oslo.Config{Host: cfg.Default.Host, Logger: slog.New(slog.DiscardHandler),
				RetryInterval: 100 * time.Millisecond, RetryMax: 200 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Close()
			if c.connect {
				if !waitCond(15*time.Second, tr.Connected) {
					t.Fatalf("not connected (TLS handshakes %d, refused %d)", c.relay.Handshakes.Load()-hs, c.relay.Refused.Load()-refused)
				}
				if c.relay.Handshakes.Load() == hs {
					t.Fatal("connected without a TLS handshake at the relay")
				}
				return
			}
			if !waitCond(15*time.Second, func() bool { return c.relay.Refused.Load() > refused }) {
				t.Fatal("the relay saw no refused handshake")
			}
			if tr.Connected() || c.relay.Handshakes.Load() != hs {
				t.Fatal("connected through a certificate that must be refused")
			}
		})
	}
}

// TestExplainAndTakeoverUseTLS: `explain` and `takeover --dry-run` reach the
// broker through the same TLS decision as the agent. A private OVS holds one
// VM port, so both get as far as asking the server about it; the broker is
// reachable only through the TLS relay.
func TestExplainAndTakeoverUseTLS(t *testing.T) {
	requireRabbit(t)
	o := ovstest.Start(t)
	if err := o.AddBridge("br-int"); err != nil {
		t.Fatal(err)
	}
	const portID = "4c1b6d2e-7f38-4d55-9a0e-tlstest00001"
	if out, err := o.Vsctl("add-port", "br-int", "tlsvm1", "--", "set", "Interface", "tlsvm1", "type=internal",
		"external_ids:iface-id="+portID, "external_ids:attached-mac=fa:16:3e:00:00:51", "external_ids:iface-status=active"); err != nil {
		t.Fatalf("add-port: %v: %s", err, out)
	}
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "explain-ca")
	relay := tlstest.NewRelay(t, ca.Issue(t, nil, []net.IP{net.ParseIP("127.0.0.1")}), "127.0.0.1:5672")
	cfg := loadConf(t, fmt.Sprintf("[DEFAULT]\nhost = tls-explain\ncontrol_exchange = tlstest-%d\n"+
		"transport_url = rabbit://guest:guest@127.0.0.1:%d/?ssl=1\n[oslo_messaging_rabbit]\nssl_ca_file = %s\n"+
		"[ovs]\novsdb_connection = %s\n[ovsagent]\nmetrics_listen =\n", time.Now().UnixNano(), relay.Port, ca.WritePEM(t, dir), o.DB))
	log := slog.New(slog.DiscardHandler)
	for name, f := range map[string]func(ctx context.Context, w io.Writer) error{
		"explain":          func(ctx context.Context, w io.Writer) error { return explain(ctx, cfg, log, portID, w) },
		"takeover dry-run": func(ctx context.Context, w io.Writer) error { return takeoverDryRun(ctx, cfg, log, w) },
	} {
		t.Run(name, func(t *testing.T) {
			hs, refused := relay.Handshakes.Load(), relay.Refused.Load()
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- f(ctx, &bytes.Buffer{}) }()
			ok := waitCond(20*time.Second, func() bool { return relay.Handshakes.Load() > hs || relay.Refused.Load() > refused })
			cancel()
			err := <-done
			if !ok {
				t.Fatalf("never reached the broker: %v", err)
			}
			if relay.Handshakes.Load() == hs {
				t.Fatalf("%s reached the broker without TLS (handshakes refused by the relay: %d): %v", name, relay.Refused.Load()-refused, err)
			}
		})
	}
}
