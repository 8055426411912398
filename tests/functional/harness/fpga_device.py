"""Stand-in for an FPGA card's programming tool, for functional tests.

Run by the sidecar's ``command`` programmer as::

    python .../fpga_device.py SYSFS_ROOT ADDRESS FILE

A test bitstream is a text file whose first line is the function id it
holds (32 hex digits). Loading it writes that id where the card then
reports its loaded function: the ``afu_id`` of the DFL port reached
through ADDRESS (``dfl-port.M/afu_id``, the PF's or a released port's
VF's; Documentation/ABI/testing/sysfs-platform-dfl-port), and appends
a line to ``SYSFS_ROOT/../programmed.log`` so tests can check what was
programmed, where and when. A first line of ``sleep N``
makes the "card" take N seconds (to kill a sidecar mid-programming); one of
``fail`` makes it fail.
"""

import os
import re
import sys
import time

from sidecar.sources import dfl


def _afu_id_path(root, address):
    """Where the FPGA at ``address`` reports its function, or None."""
    ports = [p for card in dfl.cards(root).values() for p in card.ports
             if p.address == address]
    if len(ports) == 1:
        return os.path.join(ports[0].path, 'afu_id')
    return None


def main(argv=None):
    root, address, path = (argv or sys.argv[1:])[:3]
    with open(path) as f:
        lines = f.read().split()
    while lines and lines[0] == 'sleep':
        time.sleep(float(lines[1]))
        lines = lines[2:]
    if not lines or lines[0] == 'fail':
        sys.stderr.write('card refused the bitstream\n')
        return 3
    function_id = lines[0].lower()
    if not re.match(r'^[0-9a-f]{32}$', function_id):
        sys.stderr.write('not a bitstream\n')
        return 2
    path = _afu_id_path(root, address)
    if path is None:
        sys.stderr.write('no FPGA port at %s\n' % address)
        return 1
    with open(path, 'w') as f:
        f.write(function_id + '\n')
    log = os.path.join(os.path.dirname(root), 'programmed.log')
    with open(log, 'a') as f:
        f.write('%f %s %s\n' % (time.time(), address, function_id))
    return 0


if __name__ == '__main__':
    sys.exit(main())
