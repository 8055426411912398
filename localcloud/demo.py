"""The main job: boot a server with an accelerator and show it.

Uses only what a user of the cloud uses: the ``openstack`` client (with
python-cyborgclient's ``openstack accelerator``, this project's
``openstack server accelerator`` and osc-placement's ``openstack resource
provider`` commands) under the cloud's ``openrc``.
"""

import json
import re
import subprocess
import time

from localcloud import access

PROFILE = 'fpga-demo'
GROUPS = [{'resources:FPGA': '1', 'trait:CUSTOM_FPGA_INTEL': 'required'}]
FLAVOR = 'accel.demo'
SERVER = 'accel-demo'


class DemoError(Exception):
    pass


def openstack(layout, *args, out=None, parse=True):
    argv = [layout.bin('openstack')] + list(args)
    if out:
        out('$ openstack ' + ' '.join(
            "'%s'" % a if any(c in a for c in ' {"[') else a for a in args))
    if parse:
        argv += ['-f', 'json']
    proc = subprocess.run(argv, env=access.openrc_env(layout),
                          capture_output=True, text=True)
    if proc.returncode:
        raise DemoError('openstack %s failed:\n%s' % (
            ' '.join(args), proc.stderr.strip()))
    return json.loads(proc.stdout) if parse else proc.stdout


def hostdev_lines(layout, server_id):
    with open('%s/%s.xml' % (layout.domain_xml_dir, server_id)) as f:
        xml = f.read()
    return [' '.join(m.split())
            for m in re.findall(r'<hostdev.*?</hostdev>', xml, re.S)]


def run(layout, image, out=print):
    started = time.monotonic()
    openstack(layout, 'accelerator', 'device', 'profile', 'create', PROFILE,
              json.dumps(GROUPS), out=out)
    openstack(layout, 'flavor', 'create', '--vcpus', '1', '--ram', '512',
              '--disk', '1', '--property',
              'accel:device_profile=' + PROFILE, FLAVOR, out=out)
    server = openstack(layout, 'server', 'create', '--flavor', FLAVOR,
                       '--image', image, '--nic', 'none', '--wait', SERVER,
                       out=out)
    elapsed = time.monotonic() - started
    server = openstack(layout, 'server', 'show', server['id'])
    out('')
    out('Server %s (%s): %s on %s' % (
        server['name'], server['id'], server['status'],
        server['OS-EXT-SRV-ATTR:host']))
    # This project's client plugin (nova_cyborg_client): the server's ARQs.
    arqs = openstack(layout, 'server', 'accelerator', 'list', server['id'],
                     out=out)
    for arq in arqs:
        provider = openstack(layout, 'resource', 'provider', 'show',
                             arq['Device Provider'])
        info = arq.get('Attach Handle') or {}
        out('ARQ %s: %s, %s %s; provider %s (%s)' % (
            arq['UUID'], arq['State'], arq['Attach Handle Type'],
            '%(domain)s:%(bus)s:%(device)s.%(function)s' % info
            if 'bus' in info else info, provider['name'],
            provider['uuid']))
    out('Placement allocation of %s:' % server['id'])
    allocations = openstack(layout, 'resource', 'provider', 'allocation',
                            'show', server['id'], out=out)
    for allocation in allocations:
        out('  %s: %s' % (allocation['resource_provider'],
                          allocation['resources']))
    out('Domain XML <hostdev> of %s:' % server['id'])
    lines = hostdev_lines(layout, server['id'])
    for line in lines:
        out('  ' + line)
    out('Profile, flavor and boot to ACTIVE: %.1f s' % elapsed)
    if server['status'] != 'ACTIVE' or not arqs or not lines:
        raise DemoError('the server has no accelerator: status %s, %d '
                        'ARQs, %d <hostdev>' % (server['status'], len(arqs),
                                                len(lines)))
    return server
