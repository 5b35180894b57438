// Package tlstest makes a throw-away CA and a TLS relay on 127.0.0.1 for
// tests of TLS clients against the plain RabbitMQ on 127.0.0.1:5672.
package tlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// CA is a certificate authority made for one test.
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	der  []byte
}

var serial atomic.Int64

// NewCA makes a CA valid for a day.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial.Add(1)), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &CA{cert: cert, key: key, der: der}
}

// Issue makes a server certificate for the given DNS names and IPs.
func (ca *CA) Issue(t testing.TB, dns []string, ips []net.IP) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial.Add(1)), Subject: pkix.Name{CommonName: "tlstest server"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames: dns, IPAddresses: ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// Pool is a cert pool holding only this CA.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

// WritePEM writes the CA certificate to a file in dir and returns its path.
func (ca *CA) WritePEM(t testing.TB, dir string) string {
	t.Helper()
	path := filepath.Join(dir, ca.cert.Subject.CommonName+".pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// Relay is a TLS listener on 127.0.0.1 that forwards every connection whose
// handshake succeeds to a plain TCP target.
type Relay struct {
	Port int
	// Handshakes counts completed TLS handshakes, Refused the connections
	// whose handshake failed (a plain AMQP client, a client that rejected
	// the certificate).
	Handshakes, Refused atomic.Int64
	// ServerNames lists the SNI names clients sent.
	mu          sync.Mutex
	serverNames []string
}

// ServerNames returns the SNI names seen so far.
func (r *Relay) ServerNames() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.serverNames...)
}

// NewRelay listens on 127.0.0.1 (a free port) until the test ends.
func NewRelay(t testing.TB, cert tls.Certificate, target string) *Relay {
	t.Helper()
	r := &Relay{}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
		r.mu.Lock()
		r.serverNames = append(r.serverNames, h.ServerName)
		r.mu.Unlock()
		return nil, nil
	}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r.Port = ln.Addr().(*net.TCPAddr).Port
	var wg sync.WaitGroup
	var mu sync.Mutex
	var open []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range open {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				tc := tls.Server(c, cfg)
				_ = tc.SetDeadline(time.Now().Add(10 * time.Second))
				if err := tc.Handshake(); err != nil {
					r.Refused.Add(1)
					c.Close()
					return
				}
				_ = tc.SetDeadline(time.Time{})
				r.Handshakes.Add(1)
				up, err := net.Dial("tcp", target)
				if err != nil {
					tc.Close()
					return
				}
				mu.Lock()
				open = append(open, tc, up)
				mu.Unlock()
				done := make(chan struct{}, 2)
				go func() { _, _ = io.Copy(up, tc); done <- struct{}{} }()
				go func() { _, _ = io.Copy(tc, up); done <- struct{}{} }()
				<-done
				tc.Close()
				up.Close()
				<-done
			}()
		}
	}()
	return r
}

// ClosedPort returns a port on 127.0.0.1 nothing listens on.
func ClosedPort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	return p
}
