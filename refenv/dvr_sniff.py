#!/usr/bin/env python3
"""dvr_sniff.py IFACE SECONDS [plain] — VXLAN frames (UDP 4789) seen on IFACE for SECONDS, one line each:

  <outer src ip> <outer dst ip> vni=<n> <inner src mac> <inner dst mac> <inner src ip|-> <inner dst ip|->

refenv/dvr_e2e.sh runs it inside a hypervisor's netns on its underlay veth (und<N>) to show which
Ethernet source DVR puts inside the tunnel. An AF_PACKET socket: no tcpdump needed. Frames that are
not IPv4/UDP/4789 are counted on the last line only ("# other N"). With "plain": every IPv4 or ARP
frame instead, as "<in|out> <src mac> <src ip> <dst ip>" (the outside namespace's veths).
"""
import socket
import struct
import sys
import time


def mac(b):
    return ":".join("%02x" % x for x in b)


def inner_ips(f):
    """IPv4 source and destination of an Ethernet frame (VLAN tags skipped), or ('-', '-')."""
    et = struct.unpack("!H", f[12:14])[0]
    off = 14
    while et in (0x8100, 0x88A8) and len(f) >= off + 4:
        et = struct.unpack("!H", f[off + 2:off + 4])[0]
        off += 4
    if et == 0x0800 and len(f) >= off + 20:
        return socket.inet_ntoa(f[off + 12:off + 16]), socket.inet_ntoa(f[off + 16:off + 20])
    if et == 0x0806 and len(f) >= off + 28:
        return "arp:" + socket.inet_ntoa(f[off + 14:off + 18]), "arp:" + socket.inet_ntoa(f[off + 24:off + 28])
    return "-", "-"


def main():
    iface, secs = sys.argv[1], float(sys.argv[2])
    plain = len(sys.argv) > 3 and sys.argv[3] == "plain"
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
    s.bind((iface, 0))
    s.settimeout(0.2)
    end = time.monotonic() + secs
    other = 0
    while time.monotonic() < end:
        try:
            f, addr = s.recvfrom(65535)
        except socket.timeout:
            continue
        if plain:
            # every IPv4/ARP frame: direction on IFACE (PACKET_OUTGOING = 4), Ethernet and IP source, IP destination
            isrc, idst = inner_ips(f)
            if isrc != "-":
                print("out" if addr[2] == socket.PACKET_OUTGOING else "in", mac(f[6:12]), isrc, idst, flush=True)
            else:
                other += 1
            continue
        if len(f) < 14 + 20 + 8 + 8 + 14 or struct.unpack("!H", f[12:14])[0] != 0x0800:
            other += 1
            continue
        ihl = (f[14] & 0x0F) * 4
        if f[14 + 9] != 17:
            other += 1
            continue
        udp = 14 + ihl
        if struct.unpack("!H", f[udp + 2:udp + 4])[0] != 4789:
            other += 1
            continue
        src, dst = socket.inet_ntoa(f[26:30]), socket.inet_ntoa(f[30:34])
        vx = udp + 8
        vni = struct.unpack("!I", b"\x00" + f[vx + 4:vx + 7])[0]
        inner = f[vx + 8:]
        isrc, idst = inner_ips(inner)
        print(src, dst, "vni=%d" % vni, mac(inner[6:12]), mac(inner[0:6]), isrc, idst, flush=True)
    print("# other", other, flush=True)


if __name__ == "__main__":
    main()
