"""P6: the sidecar's discovery time and memory at 1, 100 and 1000 VFs.

Each size runs in a fresh process (``python -m benchmarks.discovery --vfs
N``, one JSON line out) so that its memory figures are its own. The host
is generated with :mod:`sidecar_simulator.host`: FPGAs (Intel DFL cards,
each port released to a VF) of up to ``VFS_PER_PF`` VFs each, ``N`` VFs in
all, written as a sysfs tree. The sidecar is built
with :func:`sidecar.daemon.factory.build` from a configuration enabling the
``fpga``, ``pci`` and ``gpu`` drivers (each reads the whole tree) over
the ``sysfs`` source, on a ``fake://`` transport. Figures:

``build_s``
    ``factory.build`` (drivers loaded, clients made; nothing discovered).
``first_s``
    The first discovery (``Inventory.discover``): every driver.
``cycle_s``
    Median of ``REPEATS`` cycles with nothing changed: discovery, the
    wire objects and their digest (what the reporter compares; a cycle
    with no change sends nothing).
``peak_kib``
    tracemalloc's peak over one such cycle (Python allocations).
``rss_kib``, ``rss_delta_kib``
    The process's resident set after the cycles, and its growth since
    before the host was built.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc

SIZES = (1, 100, 1000)
#: A DFL card's ports, one a VF (drivers/fpga/dfl.h MAX_DFL_FPGA_PORT_NUM;
#: sidecar_simulator.dfl.MAX_PORTS).
VFS_PER_PF = 4
REPEATS = 5
PCI_SPEC = '{"vendor_id": "8086", "product_id": "1528"}'


def rss_kib(field='VmRSS'):
    with open('/proc/self/status') as f:
        for line in f:
            if line.startswith(field + ':'):
                return int(line.split()[1])
    return None


def simulated_host(num_vfs):
    from sidecar_simulator import host as simulator
    host = simulator.SimulatedHost()
    left = num_vfs
    while left > 0:
        host.add_fpga(num_vfs=min(left, VFS_PER_PF))
        left -= VFS_PER_PF
    return host


def build_sidecar(base, device_specs=(PCI_SPEC,), drivers='fpga,pci,gpu'):
    """The sidecar's objects for the tree under ``base/sys``, with these
    ``[pci] device_spec`` entries, connected to nothing."""
    import oslo_messaging as messaging
    from sidecar.daemon import factory
    from tests.functional.harness import sidecar_fixture
    path = sidecar_fixture.write_config(
        os.path.join(base, 'sidecar.conf'), host='bench',
        drivers=drivers, sysfs_root=os.path.join(base, 'sys'),
        state_path=os.path.join(base, 'state'),
        placement_url='http://127.0.0.1:9')
    with open(path, 'a') as f:
        f.write('\n[pci]\n' + ''.join('device_spec = %s\n' % spec
                                      for spec in device_specs))
    conf = sidecar_fixture.make_conf(['--config-file', path])
    transport = messaging.get_rpc_transport(conf, url='fake://')
    return factory.build(conf, transport=transport, connect=lambda: None)


def measure(num_vfs):
    # Imported first, so that rss_delta_kib is what the host costs.
    import oslo_messaging  # noqa: F401
    from sidecar.daemon import factory  # noqa: F401
    from sidecar.report import reporter as report
    from tests.functional.harness import sidecar_fixture  # noqa: F401
    rss_before = rss_kib()
    with tempfile.TemporaryDirectory() as base:
        host = simulated_host(num_vfs)
        host.write(os.path.join(base, 'sys'))
        start = time.monotonic()
        sidecar = build_sidecar(base)
        build_s = time.monotonic() - start

        def cycle():
            devices = sidecar.inventory.discover()
            return report.digest(report.to_wire('bench', devices))

        start = time.monotonic()
        devices = sidecar.inventory.discover()
        first_s = time.monotonic() - start
        times = []
        for _i in range(REPEATS):
            start = time.monotonic()
            cycle()
            times.append(time.monotonic() - start)
        tracemalloc.start()
        cycle()
        _current, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        handles = sum(len(dep.attach_handles) for device in devices
                      for dep in device.deployables)
        return {'vfs': num_vfs, 'devices': len(devices),
                'attach_handles': handles, 'build_s': build_s,
                'first_s': first_s, 'cycle_s': statistics.median(times),
                'peak_kib': peak // 1024, 'rss_kib': rss_kib(),
                'rss_delta_kib': rss_kib() - rss_before}


def run_all(sizes=SIZES, log_path=os.devnull):
    """Each size in its own process; returns the list of results."""
    results = []
    with open(log_path, 'w') as log:
        for size in sizes:
            out = subprocess.run(
                [sys.executable, '-m', 'benchmarks.discovery', '--vfs',
                 str(size)], check=True, stdout=subprocess.PIPE,
                stderr=log, text=True,
                cwd=os.path.dirname(os.path.dirname(os.path.abspath(
                    __file__)))).stdout
            results.append(json.loads(out.strip().splitlines()[-1]))
    return results


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--vfs', type=int, required=True)
    args = parser.parse_args(argv)
    print(json.dumps(measure(args.vfs), sort_keys=True))
    return 0


if __name__ == '__main__':
    sys.exit(main())
