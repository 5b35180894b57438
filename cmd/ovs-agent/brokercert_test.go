package main

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"

	"github.com/ovsagent/ovsagent/internal/config"
	"github.com/ovsagent/ovsagent/internal/testing/tlstest"
)

// TestRabbitClientCertificate: ssl_cert_file and ssl_key_file become the
// client certificate offered to the broker (the key in the certificate file
// when ssl_key_file is empty, as oslo.messaging); a key that does not match
// fails the configuration instead of dialling without a certificate.
func TestRabbitClientCertificate(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "client-ca")
	cert := ca.Issue(t, []string{"agent.example"}, nil)
	keyDER, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	certFile, keyFile := write("c.pem", certPEM), write("k.pem", keyPEM)
	both := write("both.pem", append(append([]byte{}, certPEM...), keyPEM...))
	other := ca.Issue(t, []string{"other.example"}, nil)
	otherDER, err := x509.MarshalPKCS8PrivateKey(other.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	otherKey := write("other-k.pem", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: otherDER}))

	for _, c := range []struct{ cert, key string }{{certFile, keyFile}, {both, ""}} {
		cfg := config.Defaults()
		cfg.Rabbit.SSL, cfg.Rabbit.SSLCertFile, cfg.Rabbit.SSLKeyFile = true, c.cert, c.key
		tc, err := rabbitTLS(cfg)
		if err != nil {
			t.Fatalf("cert %s key %q: %v", c.cert, c.key, err)
		}
		if len(tc.Certificates) != 1 || !bytes.Equal(tc.Certificates[0].Certificate[0], cert.Certificate[0]) {
			t.Fatalf("cert %s key %q: client certificate not offered: %d certificates", c.cert, c.key, len(tc.Certificates))
		}
	}
	cfg := config.Defaults()
	cfg.Rabbit.SSL = true
	if tc, err := rabbitTLS(cfg); err != nil || len(tc.Certificates) != 0 {
		t.Fatalf("no ssl_cert_file: %v, %d certificates", err, len(tc.Certificates))
	}
	cfg.Rabbit.SSLCertFile, cfg.Rabbit.SSLKeyFile = certFile, otherKey
	if _, err := rabbitTLS(cfg); err == nil {
		t.Fatal("a key that does not match ssl_cert_file was accepted")
	}
}
