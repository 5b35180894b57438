#!/usr/bin/python3
"""neutron-server's own floor for turning ports ACTIVE: no agent at all.

usage: floor.py NETWORK_ID HOST N CHUNK [PROJECT]

The same measurement as refenv/floor.py (N ports bound to HOST, reported up with
update_device_list through neutron's own RPC client, exactly as an agent would), made to work at
N = 1,000: refenv's creates all N ports in one POST, which the server does not answer within
300 s at 1,000. Here they are created 50 per POST, and deleted by 4 threads afterwards.
  CHUNK = 1:  prints "single P50": seconds from the call to ACTIVE in the API, one port per call
  CHUNK > 1:  prints "bulk S": seconds from the first call until all N are ACTIVE in the API;
              the calls go one after another, CHUNK ports each, as an agent sends them
Polling the API costs the server too: the bulk wait polls at an interval twice as long as the
last GET took (at least 20 ms), as bench.py does while an agent works.
"""
import json
import sys
import threading
import time
import urllib.request

from neutron_rpc import plugin_client

API = "http://127.0.0.1:9696/v2.0"
CREATE_CHUNK = 50


def api(method, path, body=None, project="demo"):
    req = urllib.request.Request(API + path, method=method,
                                 data=json.dumps(body).encode() if body else None,
                                 headers={"Content-Type": "application/json", "X-Project-Id": project})
    with urllib.request.urlopen(req, timeout=300) as r:
        data = r.read()
        return json.loads(data) if data else None


def create_ports(net, host, n, tag, project):
    ids = []
    for i in range(0, n, CREATE_CHUNK):
        body = {"ports": [{"network_id": net, "project_id": project, "name": tag,
                           "binding:host_id": host, "device_owner": "compute:nova", "device_id": tag}
                          for _ in range(min(CREATE_CHUNK, n - i))]}
        ids += [p["id"] for p in api("POST", "/ports", body, project)["ports"]]
    return ids


def delete_ports(ids, project, workers=4):
    left, lock = list(ids), threading.Lock()

    def w():
        while True:
            with lock:
                if not left:
                    return
                pid = left.pop()
            try:
                api("DELETE", "/ports/" + pid, None, project)
            except Exception:
                pass  # bench.py removes floor-* leftovers
    ts = [threading.Thread(target=w) for _ in range(workers)]
    [t.start() for t in ts]
    [t.join() for t in ts]


def main():
    net, host, n, chunk = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    project = sys.argv[5] if len(sys.argv) > 5 else "demo"
    ctx, rpc = plugin_client("1.9")
    tag = "floor-%d" % int(time.time() * 1000)
    ids = create_ports(net, host, n, tag, project)
    time.sleep(2)

    def up(batch):
        rpc.call(ctx, "update_device_list", devices_up=batch, devices_down=[],
                 agent_id="ovs-agent-" + host, host=host, refresh_tunnels=False)

    def all_active(t0):
        while True:
            g0 = time.time()
            st = api("GET", "/ports?device_id=%s&fields=status" % tag, None, project)["ports"]
            took = time.time() - g0
            if all(p["status"] == "ACTIVE" for p in st) or time.time() - t0 > 3600:
                return time.time() - t0
            time.sleep(max(0.02, 2 * took))

    try:
        if chunk == 1:
            times = []
            for pid in ids:
                t0 = time.time()
                up([pid])
                while api("GET", "/ports/%s?fields=status" % pid, None, project)["port"]["status"] != "ACTIVE":
                    if time.time() - t0 > 30:
                        break
                    time.sleep(0.01)
                times.append(time.time() - t0)
            times.sort()
            print("single %.3f" % times[len(times) // 2])
        else:
            t0 = time.time()
            for i in range(0, n, chunk):
                up(ids[i:i + chunk])
            print("bulk %.3f" % all_active(t0))
    finally:
        delete_ports(ids, project)


if __name__ == "__main__":
    main()
