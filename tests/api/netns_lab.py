"""Network namespaces for the two-hosts test: each "host" is a namespace joined to the test's own
namespace by a veth pair, with addresses of its own (10.213.N.x, N picked so that no address of
that /24 is in use). The test's side of each pair is the host's only link: cutting it (link
down) cuts the host off from its clients and from PostgreSQL, Redis and the sinks alike.

PostgreSQL, Redis and the sinks listen on 127.0.0.1 only; a Forward on the test's side of a
pair (e.g. 10.213.N.1:port) relays a host's connections to them. Traffic only flows between
namespaces the lab made and the test's own loopback; the namespaces have no other route.

    with Lab(["a", "b"]) as lab:
        lab.host("a").netns, lab.host("a").ip, lab.host("a").gateway
        lab.forward("a", "127.0.0.1", 5432) -> (gateway, port) that host a connects to
        lab.cut("a"); lab.restore("a")

Needs root and iproute2 (`ip netns`); check() says why not, for the test to fail with that."""
import os
import random
import shutil
import socket
import subprocess
import threading

PREFIX = "coachd-lab-"  # namespace names: PREFIX + pid + "-" + host name


def check():
    """None when the lab can run here, else the reason."""
    if os.geteuid() != 0:
        return "the two-hosts test needs root (network namespaces); run scripts/test as root"
    if not shutil.which("ip"):
        return "the two-hosts test needs iproute2 (`ip netns`): apt-get install iproute2"
    if not shutil.which("nsenter"):
        return "the two-hosts test needs nsenter: apt-get install util-linux"
    r = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True)
    if r.returncode != 0:
        return "`ip netns list` failed: %s" % r.stderr.strip()
    return None


def in_netns(netns):
    """The command prefix that runs a program in network namespace `netns`. nsenter switches the
    network namespace only; `ip -n` and `ip netns exec` also remount /sys in a new mount
    namespace, which fails where / is not a mount point (a chroot, as in a fresh-root CI)."""
    return ["nsenter", "--net=/var/run/netns/" + netns]


def ip(*args, netns=None, check_rc=True):
    cmd = (in_netns(netns) if netns else []) + ["ip"] + [str(a) for a in args]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    if check_rc and r.returncode != 0:
        raise AssertionError("%s failed: %s" % (" ".join(cmd), r.stderr.strip()))
    return r.stdout


def remove_stale():
    """Deletes the namespaces of earlier runs whose test process is gone (a run killed before
    its clean-up)."""
    for line in ip("netns", "list").splitlines():
        name = line.split()[0] if line.strip() else ""
        if not name.startswith(PREFIX):
            continue
        pid = name[len(PREFIX):].split("-")[0]
        if pid.isdigit() and not os.path.exists("/proc/%s" % pid):
            ip("netns", "del", name, check_rc=False)


def free_subnet():
    """A third octet N such that no address or route in 10.213.N.0/24 is configured in this
    namespace."""
    used = ip("-o", "-4", "addr", "show") + " " + ip("-4", "route", "show", "table", "all")
    for _ in range(100):
        n = random.randint(1, 254)
        if "10.213.%d." % n not in used:
            return n
    raise AssertionError("no free 10.213.N.0/24")


class Host:
    def __init__(self, name, netns, veth, ip_addr, gateway):
        self.name = name
        self.netns = netns      # the namespace coachd runs in
        self.veth = veth        # the test's side of the pair (cut/restore act on it)
        self.ip = ip_addr       # the host's address, reachable from the test
        self.gateway = gateway  # the test's address on the pair, reachable from the host


class Forward:
    """A TCP relay: listens on (ip, port 0) and connects each accepted connection to target."""

    def __init__(self, listen_ip, target):
        self.target = target
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((listen_ip, 0))
        self.sock.listen(128)
        self.addr = self.sock.getsockname()
        self.conns = []
        self.lock = threading.Lock()
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            try:
                u = socket.create_connection(self.target, 5)
                u.settimeout(None)
            except OSError:
                c.close()
                continue
            with self.lock:
                if self.closed:
                    c.close()
                    u.close()
                    return
                self.conns += [c, u]
            for a, b in ((c, u), (u, c)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src, dst):
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        for s, how in ((dst, socket.SHUT_WR), (src, socket.SHUT_RD)):
            try:
                s.shutdown(how)
            except OSError:
                pass

    def close(self):
        with self.lock:
            self.closed = True
            conns, self.conns = self.conns, []
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
        for s in conns:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()


class Lab:
    def __init__(self, names):
        self.names = list(names)
        self.hosts = {}
        self.forwards = []
        self.subnet = None

    def __enter__(self):
        reason = check()
        if reason:
            raise AssertionError(reason)
        remove_stale()
        n = free_subnet()
        try:
            # Nothing for 10.213.N.0/24 may leave through the default route, not even while a
            # host's link is down (its /30 route is gone then): the whole /24 is unreachable
            # but for the /30s of the links that are up.
            self.subnet = "10.213.%d.0/24" % n
            ip("route", "add", "unreachable", self.subnet)
            for i, name in enumerate(self.names):
                netns = "%s%d-%s" % (PREFIX, os.getpid(), name)
                veth = "cl%d%s" % (os.getpid() % 100000, name)[:15]
                gateway, addr = "10.213.%d.%d" % (n, 4 * i + 1), "10.213.%d.%d" % (n, 4 * i + 2)
                ip("netns", "add", netns)
                self.hosts[name] = Host(name, netns, veth, addr, gateway)
                ip("link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", netns)
                ip("addr", "add", gateway + "/30", "dev", veth)
                ip("link", "set", veth, "up")
                ip("addr", "add", addr + "/30", "dev", "eth0", netns=netns)
                ip("link", "set", "eth0", "up", netns=netns)
                ip("link", "set", "lo", "up", netns=netns)
        except BaseException:
            self.__exit__()
            raise
        return self

    def host(self, name):
        return self.hosts[name]

    def forward(self, name, target_host, target_port):
        """An address on host `name`'s link that relays to target (on the test's loopback)."""
        f = Forward(self.hosts[name].gateway, (target_host, int(target_port)))
        self.forwards.append(f)
        return f.addr

    def cut(self, name):
        ip("link", "set", self.hosts[name].veth, "down")

    def restore(self, name):
        ip("link", "set", self.hosts[name].veth, "up")

    def __exit__(self, *exc):
        for f in self.forwards:
            f.close()
        for h in self.hosts.values():
            # Deleting the namespace deletes its end of the pair, and with it ours.
            ip("netns", "del", h.netns, check_rc=False)
            ip("link", "del", h.veth, check_rc=False)
        if self.subnet:
            ip("route", "del", "unreachable", self.subnet, check_rc=False)
