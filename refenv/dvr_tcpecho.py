#!/usr/bin/env python3
"""dvr_tcpecho.py — one TCP session kept across refenv/dvr_e2e.sh's steps.

  dvr_tcpecho.py serve PORT            echo server (one connection at a time, in the VM's netns)
  dvr_tcpecho.py client IP PORT FILE   one connection; a numbered line every 0.5 s, each echo
                                       checked; FILE holds "sent echoed errors reconnects last" and
                                       is rewritten after every line (the test reads it)

The client never reconnects: a broken session ends it with "closed <reason>" in FILE, which the
test reports as the session lost.
"""
import os
import socket
import sys
import time


def serve(port):
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("0.0.0.0", port))
    ls.listen(4)
    while True:
        c, _ = ls.accept()
        try:
            while True:
                d = c.recv(4096)
                if not d:
                    break
                c.sendall(d)
        except OSError:
            pass
        finally:
            c.close()


def client(ip, port, path):
    def put(state):
        with open(path + ".tmp", "w") as f:
            f.write(state + "\n")
        os.replace(path + ".tmp", path)

    s = socket.create_connection((ip, port), timeout=5)
    # a routed path may stop for many seconds (an interface removed): TCP retransmits meanwhile
    s.settimeout(None)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sent = echoed = 0
    buf = b""
    put("sent=0 echoed=0 open")
    try:
        while True:
            sent += 1
            s.sendall(b"%d\n" % sent)
            while b"\n" not in buf:
                d = s.recv(4096)
                if not d:
                    raise OSError("peer closed")
                buf += d
            line, buf = buf.split(b"\n", 1)
            if int(line) != sent:
                raise OSError("echo %r for %d" % (line, sent))
            echoed += 1
            put("sent=%d echoed=%d open t=%.1f" % (sent, echoed, time.time()))
            time.sleep(0.5)
    except (OSError, ValueError) as e:
        put("sent=%d echoed=%d closed %s" % (sent, echoed, e))


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve(int(sys.argv[2]))
    else:
        client(sys.argv[2], int(sys.argv[3]), sys.argv[4])
