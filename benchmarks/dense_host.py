"""P10: one discovery cycle on a dense host, against a small one.

Both hosts are simulated from the kernel's ABI documents and the vendors'
tools (:mod:`sidecar_simulator`), written as sysfs trees, and read by a
sidecar built with :func:`sidecar.daemon.factory.build` (``fpga``,
``gpu`` and ``pci`` drivers over the ``sysfs`` source, health monitor
included, on a ``fake://`` transport), in one process, small host first:

``dense``
    8 H100 with 32 vGPU 17 VFs each, 20 of them with type H100-4C (what
    one H100 hosts of it; the others untyped: read and left out), 2
    N6000 after port release (SR-IOV), 2 D5005, 2 Alveo U250, 2 E810
    with 64 VFs each on a physnet, 2 QAT 4xxx with 16 VFs each.
``small``
    1 H100 with 4 VFs (2 typed), 1 D5005, 1 E810 with 4 VFs.

Per host: ``first_s`` (the first discovery), ``cycle_s`` (median of
``REPEATS`` idle cycles: discovery, health, the wire objects and their
digest, as P6 times them) and ``peak_kib`` (tracemalloc's peak over one
such cycle). The row is the dense host's figures and their ratio to the
small host's, measured in the same run; nothing is judged against a
fixed time.

    python -m benchmarks.dense_host      # one JSON line
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

from benchmarks import discovery

REPEATS = 5
H100_TYPE = 'NVIDIA H100-4C'
FUNCTION_ID = '9aeffe5f84a111e8a9a3b3b1fa4b5c1d'
NIC_SPEC = ('{"vendor_id": "8086", "product_id": "1889", '
            '"physical_network": "physnet1"}')
QAT_SPEC = ('{"vendor_id": "8086", "product_id": "4941", '
            '"resource_class": "QAT"}')
#: host name -> what it holds.
HOSTS = {
    'small': {'h100': (1, 4, 2), 'n6000': 0, 'd5005': 1, 'u250': 0,
              'e810': (1, 4), 'qat': (0, 0)},
    'dense': {'h100': (8, 32, 20), 'n6000': 2, 'd5005': 2, 'u250': 2,
              'e810': (2, 64), 'qat': (2, 16)},
}


def write_host(shape, root):
    """Write the host ``shape`` (a :data:`HOSTS` value) under ``root``."""
    from sidecar_simulator import dfl
    from sidecar_simulator import host as simulator
    from sidecar_simulator import nvidia
    from sidecar_simulator import pci_health
    from sidecar_simulator import xrt
    host = simulator.SimulatedHost(start='0000:17:00.0')
    cards = nvidia.NvidiaHost(host)
    count, vfs, typed = shape['h100']
    for _i in range(count):
        cards.add_vfio_vgpu_card(num_vfs=vfs, types={
            index: H100_TYPE for index in range(typed)})
    fpgas = dfl.DflHost(host)
    for _i in range(shape['n6000']):
        fpgas.add_card('n6000', afu_id=FUNCTION_ID, sriov=True)
    for _i in range(shape['d5005']):
        fpgas.add_card('d5005', afu_id=FUNCTION_ID)
    alveo = xrt.XrtHost(host)
    for _i in range(shape['u250']):
        alveo.add_card('u250', xclbin_uuid=FUNCTION_ID)
    count, vfs = shape['e810']
    for _i in range(count):
        host.add_pf('8086', '1592', num_vfs=vfs, vf_product_id='1889')
    sys_dir = os.path.join(root, 'sys')
    fpgas.write(sys_dir, os.path.join(root, 'dev'))
    alveo.write(sys_dir)
    cards.write(sys_dir)
    count, vfs = shape['qat']
    for index in range(count):
        pci_health.add_qat(host, '0000:%02x:00.0' % (0xe0 + index),
                           'sym;asym', num_vfs=vfs)
    return host


def build_sidecar(root):
    return discovery.build_sidecar(root, (NIC_SPEC, QAT_SPEC),
                                   drivers='fpga,gpu,pci')


def measure(name):
    """The figures of the host ``name``, measured in this process."""
    from sidecar.report import reporter as report
    with tempfile.TemporaryDirectory() as root:
        host = write_host(HOSTS[name], root)
        sidecar = build_sidecar(root)

        def cycle():
            devices = sidecar.inventory.discover()
            report.digest(report.to_wire('bench', devices))
            return devices

        start = time.monotonic()
        devices = sidecar.inventory.discover()
        first_s = time.monotonic() - start
        times = []
        for _i in range(REPEATS):
            start = time.monotonic()
            cycle()
            times.append(time.monotonic() - start)
        tracemalloc.start()
        devices = cycle()
        _current, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        return {
            'host': name, 'functions': len(host.functions),
            'devices': len(devices),
            'providers': sum(len(d.deployables) for d in devices),
            'attach_handles': sum(len(dep.attach_handles) for d in devices
                                  for dep in d.deployables),
            'first_s': first_s, 'cycle_s': statistics.median(times),
            'peak_kib': peak // 1024}


def run():
    """Both hosts in this process, small first; ``{'small', 'dense'}``."""
    # Imported before either host, so that neither pays for the imports.
    import oslo_messaging  # noqa: F401
    from sidecar.daemon import factory  # noqa: F401
    from sidecar.report import reporter  # noqa: F401
    return {name: measure(name) for name in ('small', 'dense')}


def run_child(log_path=os.devnull):
    """:func:`run` in a process of its own (its log to ``log_path``)."""
    with open(log_path, 'w') as log:
        out = subprocess.run(
            [sys.executable, '-m', 'benchmarks.dense_host'], check=True,
            stdout=subprocess.PIPE, stderr=log, text=True,
            cwd=os.path.dirname(os.path.dirname(os.path.abspath(
                __file__)))).stdout
    return json.loads(out.strip().splitlines()[-1])


def rows(data, why=None):
    """P10's rows (:class:`benchmarks.report.Row`)."""
    from benchmarks import report
    if data is None:
        return [report.not_measured('P10 dense host discovery', why)]
    small, dense = data['small'], data['dense']
    shape = '%d functions, %d providers' % (dense['functions'],
                                            dense['providers'])
    return [
        report.Row('P10 dense host discovery cycle (%s)' % shape,
                   '%.0f ms' % (dense['cycle_s'] * 1000),
                   'small host (%d functions) %.0f ms' % (
                       small['functions'], small['cycle_s'] * 1000),
                   report.ratio(dense['cycle_s'], small['cycle_s'])),
        report.Row('P10 dense host memory, one cycle',
                   'peak %d KiB (tracemalloc)' % dense['peak_kib'],
                   'small host peak %d KiB' % small['peak_kib'],
                   report.ratio(dense['peak_kib'], small['peak_kib'])),
    ]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.parse_args(argv)
    print(json.dumps(run(), sort_keys=True))
    return 0


if __name__ == '__main__':
    sys.exit(main())
