//go:build e2e

package e2e

// A packet-rate probe for the QoS tests: the test binary itself, run again inside a
// namespace (ip netns exec), sends or counts small UDP datagrams. No tool on the host
// counts received packets per second over a window, and a shell loop cannot send
// thousands of datagrams a second.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

const (
	qosHelperEnv = "E2E_QOS_HELPER" // udpsend | udprecv
	// ppsWarmup skips the meter's initial bucket (no burst in the rule: OVS gives a
	// pktps meter one second of its rate) and the sender's start.
	ppsWarmup = 1500 * time.Millisecond
	ppsWindow = 3 * time.Second
	// ppsSend is the rate the sender aims at: well above any limit the tests set, and
	// bounded so that the probe does not take the shared machine's cores.
	ppsSend = 20000
)

// init runs the helper when the binary was started as one, before the tests' main.
func init() {
	mode := os.Getenv(qosHelperEnv)
	if mode == "" {
		return
	}
	if err := qosHelper(mode, os.Getenv("E2E_QOS_ADDR")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// ppsResult is what the receiver prints.
type ppsResult struct {
	Packets int64   `json:"packets"` // all received
	PPS     float64 `json:"pps"`     // received per second in [first+ppsWarmup, +ppsWindow]
}

func qosHelper(mode, addr string) error {
	switch mode {
	case "udprecv":
		pc, err := net.ListenPacket("udp4", addr)
		if err != nil {
			return err
		}
		fmt.Println("ready")
		buf := make([]byte, 2048)
		var r ppsResult
		var first time.Time
		var inWindow int64
		deadline := time.Now().Add(20 * time.Second)
		for {
			// ends 1 s after the last datagram, or 20 s after the start
			idle := time.Now().Add(time.Second)
			if first.IsZero() {
				idle = deadline
			}
			_ = pc.SetReadDeadline(idle)
			if _, _, err := pc.ReadFrom(buf); err != nil {
				break
			}
			now := time.Now()
			if first.IsZero() {
				first = now
			}
			r.Packets++
			if d := now.Sub(first); d >= ppsWarmup && d < ppsWarmup+ppsWindow {
				inWindow++
			}
		}
		r.PPS = float64(inWindow) / ppsWindow.Seconds()
		return json.NewEncoder(os.Stdout).Encode(r)
	case "udpsend":
		c, err := net.Dial("udp4", addr)
		if err != nil {
			return err
		}
		payload := make([]byte, 18) // a 64-byte frame
		start := time.Now()
		total := ppsWarmup + ppsWindow + time.Second
		var sent int64
		for {
			el := time.Since(start)
			if el >= total {
				break
			}
			// catch up to the target rate, then sleep a little
			for due := int64(el.Seconds() * ppsSend); sent < due; sent++ {
				_, _ = c.Write(payload) // ECONNREFUSED from an earlier ICMP is harmless
			}
			time.Sleep(500 * time.Microsecond)
		}
		fmt.Println(sent)
		return nil
	}
	return fmt.Errorf("unknown helper mode %q", mode)
}

// measurePPS sends UDP datagrams from namespace fromNS to toIP:port where namespace
// toNS counts them, and returns the received packets per second (over ppsWindow).
func measurePPS(ctx context.Context, fromNS, toNS, toIP string, port int) (ppsResult, error) {
	exe, err := os.Executable()
	if err != nil {
		return ppsResult{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, 40*time.Second)
	defer cancel()
	recv := exec.CommandContext(ctx, "ip", "netns", "exec", toNS, exe)
	recv.Env = append(os.Environ(), qosHelperEnv+"=udprecv", "E2E_QOS_ADDR=:"+strconv.Itoa(port))
	out, err := recv.StdoutPipe()
	if err != nil {
		return ppsResult{}, err
	}
	var stderr strings.Builder
	recv.Stderr = &stderr
	if err := recv.Start(); err != nil {
		return ppsResult{}, err
	}
	defer func() { _ = recv.Wait() }()
	rd := bufio.NewReader(out)
	if l, err := rd.ReadString('\n'); err != nil || strings.TrimSpace(l) != "ready" {
		return ppsResult{}, fmt.Errorf("receiver in %s: %q %v %s", toNS, l, err, stderr.String())
	}
	send := exec.CommandContext(ctx, "ip", "netns", "exec", fromNS, exe)
	send.Env = append(os.Environ(), qosHelperEnv+"=udpsend", "E2E_QOS_ADDR="+net.JoinHostPort(toIP, strconv.Itoa(port)))
	sent, err := send.CombinedOutput()
	if err != nil {
		return ppsResult{}, fmt.Errorf("sender in %s: %v: %s", fromNS, err, sent)
	}
	var r ppsResult
	if err := json.NewDecoder(rd).Decode(&r); err != nil {
		return ppsResult{}, fmt.Errorf("receiver in %s: %v %s", toNS, err, stderr.String())
	}
	if r.Packets == 0 {
		return r, fmt.Errorf("receiver in %s got nothing of %s sent", toNS, strings.TrimSpace(string(sent)))
	}
	return r, nil
}
