"""An oslo.messaging RPC server and client for the declaration tests (modes_test.go).

Usage: oslo_peer.py CONFIG_FILE TRANSPORT_URL TOPIC HOST

Starts an RPC server on TOPIC (server HOST), as neutron's agents and servers
do: queues TOPIC and TOPIC.HOST on the control exchange and a fanout queue;
calls itself once (the reply queue); prints "READY" and waits for stdin to
close. Any log line with PRECONDITION_FAILED (a 406: the broker refused a
declaration) prints "ERROR406 <line>" and exits 3 at once: oslo would
otherwise retry forever.
"""
import logging
import os
import sys

from oslo_config import cfg
import oslo_messaging


class Catch406(logging.Handler):
    def emit(self, record):
        msg = record.getMessage()
        if record.exc_info and record.exc_info[1] is not None:
            msg += " " + str(record.exc_info[1])
        if "PRECONDITION_FAILED" in msg or "inequivalent arg" in msg:
            sys.stdout.write("ERROR406 %s\n" % msg.replace("\n", " "))
            sys.stdout.flush()
            os._exit(3)


class Endpoint:
    target = oslo_messaging.Target(version="1.0")

    def echo(self, ctxt, **kw):
        return {"ok": True}


def main():
    conf_file, url, topic, host = sys.argv[1:5]
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    logging.captureWarnings(True)
    logging.getLogger("py.warnings").setLevel(logging.ERROR)
    logging.getLogger().addHandler(Catch406())
    # The global CONF: newer oslo.messaging registers its metrics options there.
    conf = cfg.CONF
    conf(["--config-file", conf_file], project="peer")
    transport = oslo_messaging.get_rpc_transport(conf, url=url)
    target = oslo_messaging.Target(topic=topic, server=host)
    server = oslo_messaging.get_rpc_server(transport, target, [Endpoint()],
                                           executor="threading")
    server.start()
    ctarget = oslo_messaging.Target(topic=topic, version="1.0")
    if hasattr(oslo_messaging, "get_rpc_client"):
        client = oslo_messaging.get_rpc_client(transport, ctarget, timeout=30)
    else:
        client = oslo_messaging.RPCClient(transport, ctarget, timeout=30)
    res = client.call({}, "echo")
    # ovs-agent may serve the same topic and answer instead.
    assert isinstance(res, dict), res
    sys.stdout.write("READY %s\n" % oslo_messaging.__file__)
    sys.stdout.flush()
    sys.stdin.read()
    server.stop()
    server.wait()
    transport.cleanup()


if __name__ == "__main__":
    main()
