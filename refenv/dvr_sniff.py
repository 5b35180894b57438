#!/usr/bin/env python3
"""dvr_sniff.py IFACE SECONDS [plain|vlan|tunnel] — tunnel frames seen on IFACE for SECONDS (VXLAN UDP
4789, Geneve UDP 6081, GRE IP protocol 47 carrying Ethernet), one line each:

  <outer src ip> <outer dst ip> <vni|geneve|gre>=<n> <inner src mac> <inner dst mac> <inner src ip|-> <inner dst ip|->

("vni=" is VXLAN's VNI, "geneve=" Geneve's, "gre=" the GRE key: the network's segmentation id.)
refenv/dvr_e2e.sh runs it inside a hypervisor's netns on its underlay veth (und<N>) to show which
Ethernet source DVR puts inside the tunnel. An AF_PACKET socket: no tcpdump needed. Frames that are
none of these are counted on the last line only ("# other N"). Instead:
- "plain": every IPv4, IPv6 or ARP frame, as "<in|out> <src mac> <src ip> <dst ip>" (the outside
  namespace's veths);
- "vlan": every IPv4, IPv6 or ARP frame, as "<in|out> vlan=<id|-> <src mac> <dst mac> <src ip> <dst ip>"
  (refenv/dvr_tenant.sh, on a hypervisor's veth into br-phys, the VLAN segment the hypervisors
  share). The VLAN id comes from the frame or, when the kernel took the tag off (veth's rx VLAN
  offload), from PACKET_AUXDATA. "in" = sent by the hypervisor.
- "tunnel": every tunnel frame as in the default mode, the outer addresses replaced by the
  direction: "<in|out> <vni|geneve|gre>=<n> <inner src mac> <inner dst mac> <inner src ip> <inner dst ip>"
  (refenv/dvr_tenant.sh, on the underlay bridge's port of a hypervisor: "in" = sent by it; the
  same layout as "vlan", so one check reads both).
"""
import socket
import struct
import sys
import time

SOL_PACKET = 263
PACKET_AUXDATA = 8
TP_STATUS_VLAN_VALID = 1 << 4


def mac(b):
    return ":".join("%02x" % x for x in b)


def addresses(f):
    """(VLAN id of the frame's last tag or None, IPv4/IPv6/ARP source, destination) of an
    Ethernet frame, the addresses ('-', '-') when it is none of them."""
    if len(f) < 14:
        return None, "-", "-"
    et = struct.unpack("!H", f[12:14])[0]
    off, vlan = 14, None
    while et in (0x8100, 0x88A8) and len(f) >= off + 4:
        vlan = struct.unpack("!H", f[off:off + 2])[0] & 0xFFF
        et = struct.unpack("!H", f[off + 2:off + 4])[0]
        off += 4
    if et == 0x0800 and len(f) >= off + 20:
        return vlan, socket.inet_ntoa(f[off + 12:off + 16]), socket.inet_ntoa(f[off + 16:off + 20])
    if et == 0x86DD and len(f) >= off + 40:
        return vlan, socket.inet_ntop(socket.AF_INET6, f[off + 8:off + 24]), socket.inet_ntop(socket.AF_INET6, f[off + 24:off + 40])
    if et == 0x0806 and len(f) >= off + 28:
        return vlan, "arp:" + socket.inet_ntoa(f[off + 14:off + 18]), "arp:" + socket.inet_ntoa(f[off + 24:off + 28])
    return vlan, "-", "-"


def aux_vlan(anc):
    """The VLAN id the kernel took off a frame (PACKET_AUXDATA), or None."""
    for level, typ, data in anc:
        if level == SOL_PACKET and typ == PACKET_AUXDATA and len(data) >= 20:
            status, _l, _sl, _m, _n, tci = struct.unpack("IIIHHH", data[:18])
            if status & TP_STATUS_VLAN_VALID or tci:
                return tci & 0xFFF
    return None


ETH_BRIDGING = 0x6558  # GRE/Geneve protocol type of an Ethernet payload


def tunnel(f):
    """(kind, segment id, inner Ethernet frame) of an untagged IPv4 frame carrying VXLAN (kind
    "vni"), Geneve ("geneve") or GRE with Ethernet inside ("gre", the key or 0), else None."""
    if len(f) < 14 + 20 or struct.unpack("!H", f[12:14])[0] != 0x0800:
        return None
    ihl = (f[14] & 0x0F) * 4
    l4, proto = 14 + ihl, f[14 + 9]
    if proto == 17 and len(f) >= l4 + 8 + 8 + 14:
        dport = struct.unpack("!H", f[l4 + 2:l4 + 4])[0]
        h = l4 + 8
        vni = struct.unpack("!I", b"\x00" + f[h + 4:h + 7])[0]
        if dport == 4789:
            return "vni", vni, f[h + 8:]
        if dport == 6081 and struct.unpack("!H", f[h + 2:h + 4])[0] == ETH_BRIDGING:
            return "geneve", vni, f[h + 8 + (f[h] & 0x3F) * 4:]
        return None
    if proto == 47 and len(f) >= l4 + 4:
        flags, ptype = struct.unpack("!HH", f[l4:l4 + 4])
        if ptype != ETH_BRIDGING:
            return None
        off, key = l4 + 4, 0
        if flags & 0x8000:  # checksum present (+ reserved)
            off += 4
        if flags & 0x2000:  # key present
            key = struct.unpack("!I", f[off:off + 4])[0]
            off += 4
        if flags & 0x1000:  # sequence number present
            off += 4
        if len(f) < off + 14:
            return None
        return "gre", key, f[off:]
    return None


def main():
    iface, secs = sys.argv[1], float(sys.argv[2])
    mode = sys.argv[3] if len(sys.argv) > 3 else ""
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
    if mode == "vlan":
        s.setsockopt(SOL_PACKET, PACKET_AUXDATA, 1)
    s.bind((iface, 0))
    s.settimeout(0.2)
    end = time.monotonic() + secs
    other = 0
    while time.monotonic() < end:
        try:
            if mode == "vlan":
                f, anc, _flags, addr = s.recvmsg(65535, socket.CMSG_SPACE(32))
            else:
                f, addr = s.recvfrom(65535)
        except socket.timeout:
            continue
        direction = "out" if addr[2] == socket.PACKET_OUTGOING else "in"
        if mode in ("plain", "vlan"):
            vlan, isrc, idst = addresses(f)
            if isrc == "-":
                other += 1
            elif mode == "plain":
                print(direction, mac(f[6:12]), isrc, idst, flush=True)
            else:
                if vlan is None:
                    vlan = aux_vlan(anc)
                print(direction, "vlan=" + ("-" if vlan is None else str(vlan)), mac(f[6:12]), mac(f[0:6]), isrc, idst, flush=True)
            continue
        t = tunnel(f)
        if t is None:
            other += 1
            continue
        kind, seg, inner = t
        _vlan, isrc, idst = addresses(inner)
        if mode == "tunnel":
            print(direction, "%s=%d" % (kind, seg), mac(inner[6:12]), mac(inner[0:6]), isrc, idst, flush=True)
        else:
            print(socket.inet_ntoa(f[26:30]), socket.inet_ntoa(f[30:34]), "%s=%d" % (kind, seg),
                  mac(inner[6:12]), mac(inner[0:6]), isrc, idst, flush=True)
    print("# other", other, flush=True)


if __name__ == "__main__":
    main()
