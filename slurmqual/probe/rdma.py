"""RDMA ports from /sys/class/infiniband (the fabric NICs).

The listing is read once; port attributes are read on demand by the check that
needs them, so a missing `rate` file errors nic_link without hiding dcqcn.
"""

from __future__ import annotations

from ..records import dataclass

from ..fsroot import FsError, FsRoot
from . import leading_number


@dataclass(frozen=True)
class Port:
    device: str      # mlx5_0
    port: int
    pci: str | None  # PCI address of the function, if the device link resolves

    @property
    def name(self) -> str:
        return f"{self.device}/{self.port}"

    @property
    def base(self) -> str:
        return f"/sys/class/infiniband/{self.device}/ports/{self.port}"

    def attr(self, fs: FsRoot, name: str) -> str:
        return fs.read(f"{self.base}/{name}").strip()


def list_ports(fs: FsRoot, ignore: list[str] | tuple = ()) -> list[Port]:
    ports = []
    for dev in fs.listdir("/sys/class/infiniband"):
        if dev in ignore:
            continue
        base = f"/sys/class/infiniband/{dev}"
        # A dangling class link or a device without ports/ must not make the
        # NIC silently vanish from the count: it is bad input, say so.
        if not fs.isdir(base):
            raise FsError(base, f"dangling link to {fs.realpath(base)}, expected an RDMA device directory")
        if not fs.isdir(f"{base}/ports"):
            raise FsError(f"{base}/ports", "missing: RDMA device without ports")
        devpath = fs.realpath(f"{base}/device")
        pci = devpath.rsplit("/", 1)[-1] if fs.isdir(f"{base}/device") else None
        for p in fs.listdir(f"{base}/ports"):
            if p.isdigit():
                ports.append(Port(dev, int(p), pci))
    return ports


def state_name(text: str) -> str:
    """'4: ACTIVE' -> 'ACTIVE'; '5: LinkUp' -> 'LinkUp'."""
    return text.split(":", 1)[1].strip() if ":" in text else text.strip()


def rate_gbps(fs: FsRoot, port: Port) -> float:
    path = f"{port.base}/rate"
    text = fs.read(path).strip()
    number = leading_number(text, "Gb/sec")
    if number is None:
        raise FsError(path, f"expected e.g. '400 Gb/sec (4X NDR)', found {text[:40]!r}")
    return float(number)


def netdevs(fs: FsRoot, port: Port) -> list[str]:
    """Ethernet interfaces of the port's PCI function (RoCE), e.g. ['ens1np0']."""
    nd = fs.read_or(f"{port.base}/gid_attrs/ndevs/0")
    if nd and nd.strip():
        return [nd.strip()]
    return fs.listdir(f"/sys/class/infiniband/{port.device}/device/net")


class NoNetdev(Exception):
    """A RoCE port whose netdev cannot be found: the checks that need it cannot judge."""

    def __init__(self, port: Port):
        super().__init__(f"RoCE port {port.name} has no netdev (neither {port.base}/gid_attrs/ndevs/0 nor "
                         f"/sys/class/infiniband/{port.device}/device/net/*)")
        self.port = port


def roce_netdevs(fs: FsRoot, ports: list[Port]) -> list[tuple[str, Port, str]]:
    """(label, port, netdev) of each RoCE port's netdevs; the label names the
    RDMA device and its netdev as admins look them up: 'mlx5_2 (ens3np0)'.
    Raises NoNetdev for a port without one."""
    out = []
    for port in ports:
        ifnames = netdevs(fs, port)
        if not ifnames:
            raise NoNetdev(port)
        out += [(f"{port.device} ({ifname})", port, ifname) for ifname in ifnames]
    return out


def netdev_speed_gbps(fs: FsRoot, ifname: str) -> float | None:
    """Link speed of a netdev in Gb/s; None when the link is down (-1 or EINVAL)."""
    try:
        mbps = fs.read_int(f"/sys/class/net/{ifname}/speed", 10)
    except FsError as exc:
        if exc.reason == "missing":
            raise
        return None
    return mbps / 1000 if mbps > 0 else None
