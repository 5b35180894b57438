#!/usr/bin/env python3
"""dvr_vlan_sniff.py IFACE SECONDS — the IPv4 and ARP frames seen on IFACE for SECONDS, one line each:

  <in|out> vlan=<id|-> <src mac> <dst mac> <src ip> <dst ip>

refenv/dvr_vlan.sh runs it in the outside namespace on a hypervisor's veth into br-phys (ethN), the
VLAN segment the hypervisors share, to show which Ethernet source DVR puts on a VLAN tenant
network's frames. The VLAN id comes from the frame or, when the kernel took the tag off (veth's
rx VLAN offload), from PACKET_AUXDATA. "in" = sent by the hypervisor. Other frames are counted on
the last line ("# other N"). No tcpdump on the host: an AF_PACKET socket.
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


def main():
    iface, secs = sys.argv[1], float(sys.argv[2])
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
    s.setsockopt(SOL_PACKET, PACKET_AUXDATA, 1)
    s.bind((iface, 0))
    s.settimeout(0.2)
    end = time.monotonic() + secs
    other = 0
    while time.monotonic() < end:
        try:
            f, anc, _flags, addr = s.recvmsg(65535, socket.CMSG_SPACE(32))
        except socket.timeout:
            continue
        vlan = "-"
        for level, typ, data in anc:
            if level == SOL_PACKET and typ == PACKET_AUXDATA and len(data) >= 20:
                status, _l, _sl, _m, _n, tci = struct.unpack("IIIHHH", data[:18])
                if status & TP_STATUS_VLAN_VALID or tci:
                    vlan = str(tci & 0xFFF)
        if len(f) < 14:
            other += 1
            continue
        et = struct.unpack("!H", f[12:14])[0]
        off = 14
        while et in (0x8100, 0x88A8) and len(f) >= off + 4:
            vlan = str(struct.unpack("!H", f[off:off + 2])[0] & 0xFFF)
            et = struct.unpack("!H", f[off + 2:off + 4])[0]
            off += 4
        if et == 0x0800 and len(f) >= off + 20:
            src, dst = socket.inet_ntoa(f[off + 12:off + 16]), socket.inet_ntoa(f[off + 16:off + 20])
        elif et == 0x0806 and len(f) >= off + 28:
            src, dst = "arp:" + socket.inet_ntoa(f[off + 14:off + 18]), "arp:" + socket.inet_ntoa(f[off + 24:off + 28])
        else:
            other += 1
            continue
        d = "out" if addr[2] == socket.PACKET_OUTGOING else "in"
        print(d, "vlan=" + vlan, mac(f[6:12]), mac(f[0:6]), src, dst, flush=True)
    print("# other", other, flush=True)


if __name__ == "__main__":
    main()
