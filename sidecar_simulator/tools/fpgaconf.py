"""A stand-in for OPAE's ``fpgaconf`` on a simulated DFL host.

The command line, messages and exit codes are those of opae-sdk's
``tools/fpgaconf/fpgaconf.c`` (github.com/OFS/opae-sdk; ``parse_args``,
``find_fpga``, ``main``)::

    fpgaconf [-hVn] [--segment S] [-B BUS] [-D DEVICE] [-F FUNCTION]
             [-S SOCKET] [--force] [--skip-usrclk] <gbs>

Numbers are read as ``strtoul(.., 0)`` reads them (``0x81`` is hex, ``081``
octal, ``81`` decimal). Exit codes: 0 programmed (or ``--dry-run``); 1 bad
arguments, ``-h``, ``-v``; 2 the file is not a GBS OPAE can load; 3 the
FPGAs cannot be enumerated; 4 no FPGA whose interface id is the GBS's
``interface-uuid`` matches the filters; 5 several match, or programming
failed.

The GBS is read as ``libbitstream/bitstream.c`` reads it, written again
here from that source (not the sidecar's parser). An FPGA is an FME
(``FPGA_DEVICE``): ``/sys/class/fpga_region/regionX/dfl-fme.N`` under the
card's PF, whose interface id is the ``compat_id`` of its PR region
``dfl-fme.N/dfl-fme-region.P/fpga_region/regionY`` (OPAE's xfpga plugin
reads the same files). Programming loads slot 0: the port's ``afu_id``
becomes the first ``accelerator-type-uuid`` of the GBS, as a real port
reports the AFU it was given, wherever the port is (under the PF, or
under its VF once released for SR-IOV). A raw bitstream starting with
``PR:`` and 32 hex digits loads those instead (a bitstream that does not
hold what its metadata says).

Simulator-only options, which fpgaconf lacks: ``--sysfs-root DIR`` (the
simulated ``/sys``; default ``$SIDECAR_SIMULATOR_SYSFS_ROOT`` or
``/sys``). Each programming appends ``<time> <port's PCI address> <afu
id>`` to ``<sysfs root>/../programmed.log``.
"""

import getopt
import glob
import json
import os
import re
import struct
import sys
import time
import uuid

GBS_GUID = uuid.UUID('58656f6e-4650-4741-b747-425376303031').bytes
LEGACY_MAGIC = 0x1d1f8680
_PCI = re.compile(r'^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$')


class Failed(Exception):
    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


def strtoul(text, what):
    """``strtoul(text, &end, 0)`` with ``*end`` required to be NUL."""
    text = text[1:] if text.startswith('=') else text
    try:
        if text.lower().startswith('0x'):
            return int(text[2:], 16)
        if text.startswith('0') and len(text) > 1:
            return int(text[1:], 8)
        return int(text, 10)
    except ValueError:
        raise Failed(1, 'invalid %s: %s' % (what, text))


def parse_args(argv):
    try:
        opts, args = getopt.gnu_getopt(
            argv, 'hVnB:D:F:S:AIQv',
            ['help', 'verbose', 'dry-run', 'segment=', 'bus=', 'device=',
             'function=', 'socket-id=', 'force', 'skip-usrclk', 'version',
             'sysfs-root='])
    except getopt.GetoptError as e:
        raise Failed(1, 'Missing option argument' if 'requires argument'
                     in str(e) else 'Invalid cmdline options')
    config = {'verbosity': 0, 'dry_run': False, 'target': {},
              'root': os.environ.get('SIDECAR_SIMULATOR_SYSFS_ROOT',
                                     '/sys')}
    names = {'--segment': 'segment', '-B': 'bus', '--bus': 'bus',
             '-D': 'device', '--device': 'device', '-F': 'function',
             '--function': 'function', '-S': 'socket',
             '--socket-id': 'socket'}
    for opt, value in opts:
        if opt in ('-h', '--help'):
            print('fpgaconf [-hvn] [-B <bus>] [-D <device>] [-F <function>] '
                  '[-S <socket-id>] <gbs>')
            raise Failed(1, '')
        if opt in ('-v', '--version'):
            print('fpgaconf (nova-cyborg simulator)')
            raise Failed(1, '')
        if opt in ('-V', '--verbose'):
            config['verbosity'] += 1
        elif opt in ('-n', '--dry-run'):
            config['dry_run'] = True
        elif opt == '--sysfs-root':
            config['root'] = value
        elif opt in names:
            config['target'][names[opt]] = strtoul(value, names[opt])
    if not args:
        raise Failed(1, 'No GBS file')
    path = os.path.realpath(args[0])
    if not os.path.exists(path):
        raise Failed(1, 'Error locating GBS file specified: "No such file '
                     'or directory"')
    config['filename'] = path
    return config


def load_bitstream(path):
    """``(interface id, [afu ids], raw bitstream)``; ids 32 hex digits."""
    if not os.path.isfile(path):
        raise Failed(2, 'invalid bitstream path "%s"' % path)
    with open(path, 'rb') as f:
        data = f.read()
    if len(data) >= 20 and struct.unpack_from('<I', data)[0] == \
            LEGACY_MAGIC:
        return data[4:20][::-1].hex(), [], data[20:]
    if len(data) < 21:
        raise Failed(2, 'file length smaller than bitstream header: "%s"'
                     % path)
    if data[:16] != GBS_GUID:
        raise Failed(2, 'GBS guid is invalid: "%s"' % path)
    length = struct.unpack_from('<I', data, 16)[0]
    if 20 + length > len(data):
        raise Failed(2, 'invalid metadata length in "%s"' % path)
    try:
        metadata = json.loads(data[20:20 + length].decode())
        version = metadata['version']
        if isinstance(version, bool) or version not in (1, 640, 650):
            raise ValueError('unsupported version: %r' % (version,))
        image = metadata['afu-image']
        interface = uuid.UUID(image['interface-uuid']).hex
        clusters = image['accelerator-clusters']
        if not isinstance(clusters, list):
            raise ValueError('"accelerator-clusters" key not array')
        afus = [uuid.UUID(c['accelerator-type-uuid']).hex for c in clusters]
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise Failed(2, 'invalid JSON metadata: %s' % e)
    return interface, afus, data[20 + length:]


def _read(path):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def _pci_of(path):
    """The PCI function a sysfs device directory is under."""
    for part in reversed(os.path.realpath(path).split(os.sep)):
        if _PCI.match(part):
            return part
    return None


def enumerate_fmes(root):
    """[{'pci', 'fme', 'interface', 'ports'}] of each FME on the host."""
    fmes = []
    for fme in sorted(glob.glob(os.path.join(
            root, 'class', 'fpga_region', 'region*', 'dfl-fme.*'))):
        pci = _pci_of(fme)
        regions = sorted(glob.glob(os.path.join(
            fme, 'dfl-fme-region.*', 'fpga_region', 'region*')))
        interface = _read(os.path.join(regions[0], 'compat_id')) \
            if regions else None
        # The card's ports: under the PF's base region, or each VF's.
        functions = [pci] + [
            os.path.basename(os.path.realpath(link)) for link in sorted(
                glob.glob(os.path.join(root, 'bus', 'pci', 'devices', pci,
                                       'virtfn*')))]
        ports = []
        for function in functions:
            ports += sorted(glob.glob(os.path.join(
                root, 'bus', 'pci', 'devices', function, 'fpga_region',
                'region*', 'dfl-port.*')))
        fmes.append({'pci': pci, 'fme': fme, 'interface': interface,
                     'ports': ports})
    return fmes


def _matches(fme, target):
    domain, bus, rest = fme['pci'].split(':')
    device, function = rest.split('.')
    have = {'segment': int(domain, 16), 'bus': int(bus, 16),
            'device': int(device, 16), 'function': int(function)}
    return all(have.get(k, 0) == v for k, v in target.items()
               if k != 'socket') and target.get('socket', 0) == 0


def main(argv=None):
    try:
        config = parse_args(sys.argv[1:] if argv is None else argv)
        if config['dry_run']:
            print('--dry-run is set')
        interface, afus, raw = load_bitstream(config['filename'])
        if not os.path.isdir(os.path.join(config['root'], 'class')):
            raise Failed(3, 'Error enumerating FPGAs: not found')
        candidates = [f for f in enumerate_fmes(config['root'])
                      if _matches(f, config['target'])]
        found = [f for f in candidates if f['interface'] == interface]
        if not found:
            sys.stderr.write('No suitable slots found.\n')
            if config['verbosity'] and candidates:
                print('Expected Interface id:  %s' % uuid.UUID(
                    candidates[0]['interface']))
                print('Actual Interface id:    %s' % uuid.UUID(interface))
            return 4
        if len(found) > 1:
            raise Failed(5, 'Found more than one suitable slot, please be '
                         'more specific.')
        (fme,) = found
        if config['dry_run']:
            return 0
        if raw.startswith(b'PR:'):
            afu = raw[3:35].decode('ascii', 'replace')
            if not re.match(r'^[0-9a-f]{32}$', afu):
                raise Failed(5, 'Error writing bitstream to FPGA: '
                             'FPGA_EXCEPTION')
        elif afus:
            afu = afus[0]
        else:
            raise Failed(5, 'Error writing bitstream to FPGA: '
                         'FPGA_EXCEPTION')
        if not fme['ports']:
            raise Failed(5, 'Error writing bitstream to FPGA: no port')
        port = fme['ports'][0]
        with open(os.path.join(port, 'afu_id'), 'w') as f:
            f.write(afu + '\n')
        log = os.path.join(os.path.dirname(os.path.abspath(config['root'])),
                           'programmed.log')
        with open(log, 'a') as f:
            f.write('%f %s %s\n' % (time.time(), _pci_of(port), afu))
        return 0
    except Failed as e:
        if str(e):
            sys.stderr.write(str(e) + '\n')
        return e.code


if __name__ == '__main__':
    sys.exit(main())
