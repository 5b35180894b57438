package secgroup

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Conntrack deletes conntrack entries that the firewall marked invalid.
type Conntrack interface {
	// FlushMarked deletes zone's entries whose ct_mark is mark and returns
	// how many it deleted.
	FlushMarked(ctx context.Context, zone uint16, mark uint32) (int, error)
}

// AppctlConntrack is the userspace (netdev) datapath's conntrack, reached
// through ovs-appctl at this OVS's ovs-vswitchd.<pid>.ctl in RunDir. OVS 3.1's
// dpctl/flush-conntrack filters by zone and tuple only, so the marked
// entries are listed first and flushed one original tuple at a time.
type AppctlConntrack struct {
	RunDir string
	// Run runs ovs-appctl with args (tests); exec when nil.
	Run func(ctx context.Context, args ...string) (string, error)
}

// target is ovs-vswitchd's control socket: ovs-vswitchd.<pid>.ctl by
// default, ovs-vswitchd.ctl when it was started with --unixctl=<that>.
func (c AppctlConntrack) target() (string, error) {
	pid, err := os.ReadFile(filepath.Join(c.RunDir, "ovs-vswitchd.pid"))
	if err != nil {
		return "", fmt.Errorf("conntrack: ovs-vswitchd pid: %w", err)
	}
	byPid := filepath.Join(c.RunDir, "ovs-vswitchd."+strings.TrimSpace(string(pid))+".ctl")
	if _, err := os.Stat(byPid); err == nil {
		return byPid, nil
	}
	plain := filepath.Join(c.RunDir, "ovs-vswitchd.ctl")
	if _, err := os.Stat(plain); err == nil {
		return plain, nil
	}
	return "", fmt.Errorf("conntrack: no control socket of ovs-vswitchd in %s (neither %s nor %s)", c.RunDir, filepath.Base(byPid), filepath.Base(plain))
}

func (c AppctlConntrack) appctl(ctx context.Context, args ...string) (string, error) {
	target, err := c.target()
	if err != nil {
		return "", err
	}
	args = append([]string{"-t", target}, args...)
	if c.Run != nil {
		return c.Run(ctx, args...)
	}
	out, err := exec.CommandContext(ctx, "ovs-appctl", args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("conntrack: ovs-appctl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// FlushMarked implements Conntrack.
func (c AppctlConntrack) FlushMarked(ctx context.Context, zone uint16, mark uint32) (int, error) {
	z := "zone=" + strconv.Itoa(int(zone))
	dump, err := c.appctl(ctx, "dpctl/dump-conntrack", z)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, tuple := range MarkedTuples(dump, zone, mark) {
		out, err := c.appctl(ctx, "dpctl/flush-conntrack", z, tuple)
		if err != nil {
			if strings.Contains(out, "No such file or directory") {
				continue // gone between the dump and the flush
			}
			return n, err
		}
		n++
	}
	return n, nil
}

// ctProtos are the protocols whose entries are flushed by tuple. ICMPv6 is
// left out on purpose: on OVS 3.1 dpctl/flush-conntrack with an ICMPv6
// tuple aborts ovs-vswitchd (such entries time out after 30 s).
var ctProtos = map[string]string{"tcp": "6", "udp": "17", "icmp": "1", "sctp": "132", "udplite": "136", "dccp": "33"}

// MarkedTuples reads "ovs-appctl dpctl/dump-conntrack" output and returns,
// for every entry of zone with ct_mark == mark, its original tuple in
// dpctl/flush-conntrack syntax. Entries it cannot express are skipped.
func MarkedTuples(dump string, zone uint16, mark uint32) []string {
	var out []string
	for _, line := range strings.Split(dump, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		top := splitTop(line)
		if len(top) == 0 {
			continue
		}
		proto, ok := ctProtos[top[0]]
		if !ok {
			continue
		}
		var orig map[string]string
		var lineZone, lineMark uint64
		for _, f := range top[1:] {
			k, v, _ := strings.Cut(f, "=")
			switch k {
			case "orig":
				orig = kv(strings.TrimSuffix(strings.TrimPrefix(v, "("), ")"))
			case "zone":
				lineZone, _ = strconv.ParseUint(v, 10, 16)
			case "mark":
				lineMark, _ = strconv.ParseUint(strings.TrimPrefix(v, "0x"), baseOf(v), 32)
			}
		}
		if orig == nil || lineZone != uint64(zone) || lineMark != uint64(mark) || orig["src"] == "" || orig["dst"] == "" {
			continue
		}
		src, dst := "ct_nw_src", "ct_nw_dst"
		if strings.Contains(orig["src"], ":") {
			src, dst = "ct_ipv6_src", "ct_ipv6_dst"
		}
		t := []string{src + "=" + orig["src"], dst + "=" + orig["dst"], "ct_nw_proto=" + proto}
		switch proto {
		case "1":
			for _, k := range []string{"id", "type", "code"} {
				if orig[k] == "" {
					t = nil
					break
				}
				t = append(t, "icmp_"+k+"="+orig[k])
			}
		default:
			if orig["sport"] == "" || orig["dport"] == "" {
				t = nil
				break
			}
			t = append(t, "ct_tp_src="+orig["sport"], "ct_tp_dst="+orig["dport"])
		}
		if t != nil {
			out = append(out, strings.Join(t, ","))
		}
	}
	return out
}

func baseOf(v string) int {
	if strings.HasPrefix(v, "0x") {
		return 16
	}
	return 10
}

// splitTop splits at commas outside parentheses.
func splitTop(s string) []string {
	var out []string
	depth, start := 0, 0
	for i, r := range s {
		switch r {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	return append(out, s[start:])
}

func kv(s string) map[string]string {
	m := map[string]string{}
	for _, f := range strings.Split(s, ",") {
		if k, v, ok := strings.Cut(f, "="); ok {
			m[k] = v
		}
	}
	return m
}

// conntrackPasses: a connection is marked invalid by its first packet after
// the flow change, which may come after the change is installed; the zone is
// swept again a little later to catch those.
var conntrackPasses = []time.Duration{0, 2 * time.Second, 10 * time.Second}

// conntrackCleaner runs FlushMarked off the loop for the zones the firewall
// changes touched, each zone once now and again at the later passes.
type conntrackCleaner struct {
	ct   Conntrack
	in   chan []uint16
	log  *slog.Logger
	mark uint32
}

func (c *conntrackCleaner) run(ctx context.Context) {
	due := map[uint16][]time.Time{}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		next := time.Time{}
		for _, ts := range due {
			if len(ts) > 0 && (next.IsZero() || ts[0].Before(next)) {
				next = ts[0]
			}
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		if !next.IsZero() {
			timer.Reset(time.Until(next))
		} else {
			timer.Reset(time.Hour)
		}
		select {
		case <-ctx.Done():
			return
		case zones := <-c.in:
			now := time.Now()
			for _, z := range zones {
				ts := make([]time.Time, 0, len(conntrackPasses))
				for _, p := range conntrackPasses {
					ts = append(ts, now.Add(p))
				}
				due[z] = ts
			}
		case <-timer.C:
		}
		now := time.Now()
		var zones []int
		for z, ts := range due {
			if len(ts) > 0 && !ts[0].After(now) {
				zones = append(zones, int(z))
				if due[z] = ts[1:]; len(due[z]) == 0 {
					delete(due, z)
				}
			}
		}
		sort.Ints(zones)
		for _, z := range zones {
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			n, err := c.ct.FlushMarked(cctx, uint16(z), c.mark)
			cancel()
			if err != nil {
				c.log.Warn("firewall: conntrack cleanup failed", "zone", z, "err", err)
			} else if n > 0 {
				c.log.Debug("firewall: conntrack entries marked invalid deleted", "zone", z, "entries", n)
			}
		}
	}
}

// request hands zones to the cleaner without ever blocking the loop (a full
// queue drops the request: the next change of those zones sweeps them).
func (c *conntrackCleaner) request(zones []uint16) {
	if c == nil || len(zones) == 0 {
		return
	}
	select {
	case c.in <- zones:
	default:
		c.log.Warn("firewall: conntrack cleanup queue full; request dropped", "zones", zones)
	}
}
