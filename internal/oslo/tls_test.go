//go:build integration

package oslo

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strings"
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

// TestPasswordAnyCharacters: a RabbitMQ user whose password holds every
// character that cuts a URL logs in with the percent-encoded transport_url
// (and the password goes to SASL as it is, not through a URI).
func TestPasswordAnyCharacters(t *testing.T) {
	requireBroker(t)
	node := ""
	host, _ := os.Hostname()
	host, _, _ = strings.Cut(host, ".")
	for _, n := range []string{"rabbit@localhost", "rabbit@" + host} {
		if exec.Command("rabbitmqctl", "-n", n, "-q", "status").Run() == nil {
			node = n
			break
		}
	}
	if node == "" {
		t.Fatal("rabbitmqctl reaches no local RabbitMQ node")
	}
	ctl := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("rabbitmqctl", append([]string{"-n", node, "-q"}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("rabbitmqctl %s: %v: %s", args[0], err, out)
		}
	}
	user, pass := uniq("oslo-pw"), "p/?#@,:%zz é$+&="+newID()[:6] // rabbitmqctl mangles "$$"
	ctl("add_user", user, pass)
	t.Cleanup(func() { _ = exec.Command("rabbitmqctl", "-n", node, "-q", "delete_user", user).Run() })
	ctl("set_permissions", "-p", "/", user, ".*", ".*", ".*")
	for _, c := range []struct {
		pass string
		ok   bool
	}{{pass, true}, {pass + "x", false}} {
		u, err := ParseTransportURL("rabbit://" + user + ":" + strings.ReplaceAll(url.QueryEscape(c.pass), "+", "%20") + "@127.0.0.1:5672/")
		if err != nil {
			t.Fatal(err)
		}
		if u.Hosts[0].Password != c.pass {
			t.Fatalf("password parsed as %q", u.Hosts[0].Password)
		}
		logs := &logRecorder{tb: t}
		tr, err := Dial(context.Background(), Config{URL: u, Host: "h", Logger: slog.New(logs), RetryInterval: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if c.ok && !waitUntil(15*time.Second, tr.Connected) {
			logs.dump(t)
			t.Fatal("the user with the special password did not log in")
		}
		if !c.ok && !waitUntil(15*time.Second, func() bool { return logs.count("oslo: connect failed") > 0 }) {
			t.Fatal("a wrong password was not refused")
		}
		if !c.ok && tr.Connected() {
			t.Fatal("logged in with a wrong password")
		}
		tr.Close()
	}
}
