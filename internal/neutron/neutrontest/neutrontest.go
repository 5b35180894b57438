// Package neutrontest is a small REST client for the real neutron-server that refenv
// runs (noauth, 127.0.0.1:9696), for interop and end-to-end tests. Tests that use it fail,
// never skip, when the server is absent.
package neutrontest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"testing"
	"time"
)

// Defaults for refenv; override with NEUTRON_URL / TRANSPORT_URL.
const (
	DefaultURL          = "http://127.0.0.1:9696"
	DefaultTransportURL = "rabbit://guest:guest@127.0.0.1:5672/"
	DefaultProject      = "ovsagent-test"
)

// URL is the neutron API endpoint under test.
func URL() string {
	if u := os.Getenv("NEUTRON_URL"); u != "" {
		return u
	}
	return DefaultURL
}

// TransportURL is the RabbitMQ URL neutron-server uses.
func TransportURL() string {
	if u := os.Getenv("TRANSPORT_URL"); u != "" {
		return u
	}
	return DefaultTransportURL
}

// UniqueHost returns a host name no other test run uses ("hv-test-<hex>"); never "hv1",
// which belongs to the e2e agent.
func UniqueHost(prefix string) string {
	if prefix == "" {
		prefix = "hv-test"
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	return prefix + "-" + hex.EncodeToString(b[:])
}

// Client talks to the neutron REST API as project Project.
type Client struct {
	Base    string
	Project string
	HTTP    *http.Client
}

// New returns a client for URL() and DefaultProject.
func New() *Client {
	return &Client{Base: URL(), Project: DefaultProject, HTTP: &http.Client{Timeout: 30 * time.Second}}
}

// Require returns a client after checking that neutron-server answers; the test fails
// (not skips) when it does not.
func Require(t testing.TB) *Client {
	t.Helper()
	c := New()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Agents(ctx, nil); err != nil {
		t.Fatalf("neutron-server not reachable at %s (start it with refenv/setup.sh AGENT=none): %v", c.Base, err)
	}
	return c
}

// APIError is a non-2xx answer.
type APIError struct {
	Method, Path string
	Status       int
	Body         string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("neutron API %s %s: %d %s", e.Method, e.Path, e.Status, e.Body)
}

// Do sends a request; body (if any) is JSON-encoded, the answer decoded into out.
func (c *Client) Do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.Base+"/v2.0"+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("X-Project-Id", c.Project)
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return fmt.Errorf("neutron API %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return &APIError{Method: method, Path: path, Status: resp.StatusCode, Body: string(data)}
	}
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("neutron API %s %s: decode: %w", method, path, err)
		}
	}
	return nil
}

// Agent is an entry of GET /v2.0/agents.
type Agent struct {
	ID                 string         `json:"id"`
	AgentType          string         `json:"agent_type"`
	Binary             string         `json:"binary"`
	Host               string         `json:"host"`
	Topic              string         `json:"topic"`
	Alive              bool           `json:"alive"`
	AdminStateUp       bool           `json:"admin_state_up"`
	Configurations     map[string]any `json:"configurations"`
	HeartbeatTimestamp string         `json:"heartbeat_timestamp"`
}

// Agents lists agents matching the query (e.g. {"host": {h}}).
func (c *Client) Agents(ctx context.Context, q url.Values) ([]Agent, error) {
	var r struct {
		Agents []Agent `json:"agents"`
	}
	p := "/agents"
	if len(q) > 0 {
		p += "?" + q.Encode()
	}
	err := c.Do(ctx, http.MethodGet, p, nil, &r)
	return r.Agents, err
}

// DeleteAgentsOnHost removes every agent record of host (test cleanup).
func (c *Client) DeleteAgentsOnHost(ctx context.Context, host string) error {
	agents, err := c.Agents(ctx, url.Values{"host": {host}})
	if err != nil {
		return err
	}
	for _, a := range agents {
		if err := c.Do(ctx, http.MethodDelete, "/agents/"+a.ID, nil, nil); err != nil {
			return err
		}
	}
	return nil
}

// Network is the part of a network the tests read.
type Network struct {
	ID              string `json:"id"`
	Name            string `json:"name"`
	Status          string `json:"status"`
	MTU             int    `json:"mtu"`
	NetworkType     string `json:"provider:network_type"`
	PhysicalNetwork string `json:"provider:physical_network"`
	SegmentationID  *int   `json:"provider:segmentation_id"`
}

// Subnet is the part of a subnet the tests read.
type Subnet struct {
	ID        string `json:"id"`
	NetworkID string `json:"network_id"`
	CIDR      string `json:"cidr"`
}

// Port is the part of a port the tests read.
type Port struct {
	ID          string `json:"id"`
	NetworkID   string `json:"network_id"`
	Status      string `json:"status"`
	MACAddress  string `json:"mac_address"`
	DeviceOwner string `json:"device_owner"`
	DeviceID    string `json:"device_id"`
	HostID      string `json:"binding:host_id"`
	VIFType     string `json:"binding:vif_type"`
	VIFDetails  map[string]any
	FixedIPs    []struct {
		SubnetID  string `json:"subnet_id"`
		IPAddress string `json:"ip_address"`
	} `json:"fixed_ips"`
	AdminStateUp   bool     `json:"admin_state_up"`
	SecurityGroups []string `json:"security_groups"`
}

// CreateNetwork creates a network; extra adds attributes (provider:*, ...).
func (c *Client) CreateNetwork(ctx context.Context, name string, extra map[string]any) (Network, error) {
	body := map[string]any{"name": name, "project_id": c.Project, "admin_state_up": true}
	for k, v := range extra {
		body[k] = v
	}
	var r struct {
		Network Network `json:"network"`
	}
	err := c.Do(ctx, http.MethodPost, "/networks", map[string]any{"network": body}, &r)
	return r.Network, err
}

// CreateSubnet creates an IPv4 subnet without DHCP or gateway.
func (c *Client) CreateSubnet(ctx context.Context, networkID, cidr string) (Subnet, error) {
	body := map[string]any{"network_id": networkID, "project_id": c.Project, "ip_version": 4, "cidr": cidr, "gateway_ip": nil, "enable_dhcp": false}
	var r struct {
		Subnet Subnet `json:"subnet"`
	}
	err := c.Do(ctx, http.MethodPost, "/subnets", map[string]any{"subnet": body}, &r)
	return r.Subnet, err
}

// CreatePort creates a compute port on networkID, bound to host when host is not "".
func (c *Client) CreatePort(ctx context.Context, networkID, name, host string, extra map[string]any) (Port, error) {
	body := map[string]any{"network_id": networkID, "project_id": c.Project, "name": name,
		"device_owner": "compute:nova", "device_id": name + "-vm"}
	if host != "" {
		body["binding:host_id"] = host
	}
	for k, v := range extra {
		body[k] = v
	}
	var r struct {
		Port Port `json:"port"`
	}
	err := c.Do(ctx, http.MethodPost, "/ports", map[string]any{"port": body}, &r)
	return r.Port, err
}

// UpdatePort changes port attributes (e.g. {"binding:host_id": h}).
func (c *Client) UpdatePort(ctx context.Context, id string, attrs map[string]any) (Port, error) {
	var r struct {
		Port Port `json:"port"`
	}
	err := c.Do(ctx, http.MethodPut, "/ports/"+id, map[string]any{"port": attrs}, &r)
	return r.Port, err
}

// GetPort reads a port.
func (c *Client) GetPort(ctx context.Context, id string) (Port, error) {
	var r struct {
		Port Port `json:"port"`
	}
	err := c.Do(ctx, http.MethodGet, "/ports/"+id, nil, &r)
	return r.Port, err
}

// DeletePort deletes a port (a missing port is not an error).
func (c *Client) DeletePort(ctx context.Context, id string) error {
	return ignoreNotFound(c.Do(ctx, http.MethodDelete, "/ports/"+id, nil, nil))
}

// DeleteNetwork deletes a network (a missing network is not an error).
func (c *Client) DeleteNetwork(ctx context.Context, id string) error {
	return ignoreNotFound(c.Do(ctx, http.MethodDelete, "/networks/"+id, nil, nil))
}

func ignoreNotFound(err error) error {
	if e, ok := err.(*APIError); ok && e.Status == http.StatusNotFound {
		return nil
	}
	return err
}

// WaitPortStatus polls the API until the port has status or ctx ends. The server
// changes status asynchronously to the agent's RPC, so polling the API is the only way
// to observe it.
func (c *Client) WaitPortStatus(ctx context.Context, id, status string) (Port, error) {
	var last Port
	for {
		p, err := c.GetPort(ctx, id)
		if err == nil {
			last = p
			if p.Status == status {
				return p, nil
			}
		}
		select {
		case <-ctx.Done():
			return last, fmt.Errorf("port %s: status %q, want %q: %w", id, last.Status, status, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}
