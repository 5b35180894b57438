package oslo

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/ovsagent/ovsagent/internal/testing/tlstest"
)

// TestTLSEachBrokerItsOwnName: with several brokers, each connection checks
// the certificate against its own broker's name. The first broker (down) is
// 127.0.0.1, the second is "localhost" behind a TLS relay whose certificate
// names only localhost: checked against the first broker's name, it would
// never be accepted.
func TestTLSEachBrokerItsOwnName(t *testing.T) {
	requireBroker(t)
	ca := tlstest.NewCA(t, "oslo-tls-ca")
	relay := tlstest.NewRelay(t, ca.Issue(t, []string{"localhost"}, nil), "127.0.0.1:5672")
	u, err := ParseTransportURL(fmt.Sprintf("rabbit://guest:guest@127.0.0.1:%d,guest:guest@localhost:%d/", tlstest.ClosedPort(t), relay.Port))
	if err != nil {
		t.Fatal(err)
	}
	shared := &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12}
	logs := &logRecorder{tb: t}
	tr, err := Dial(context.Background(), Config{URL: u, TLS: shared, Host: "h", Logger: slog.New(logs),
		RetryInterval: 50 * time.Millisecond, RetryBackoff: 50 * time.Millisecond, RetryMax: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	ok := waitUntil(15*time.Second, tr.Connected)
	if !ok {
		logs.dump(t)
		t.Fatalf("no connection through the second broker (handshakes %d, refused %d)", relay.Handshakes.Load(), relay.Refused.Load())
	}
	if !slices.Contains(relay.ServerNames(), "localhost") {
		t.Errorf("SNI names seen %v, want localhost", relay.ServerNames())
	}
	if shared.ServerName != "" {
		t.Errorf("the caller's TLS config was changed: ServerName %q", shared.ServerName)
	}
}

func waitUntil(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return cond()
}
