"""New devices of the local cloud: admitted disabled, enabled by the CLI.

The sidecars run with the default ``[sidecar] admit_new_devices =
disabled``: at a host's first start each FPGA is reported to Cyborg with
its provider fully reserved in Placement (``reserved = total``), so
nothing is scheduled to it. ``up`` then does what an operator does on a
new host, ``nova-cyborg-sidecar-manage device enable`` for each device,
and shows it for the first one (``device list`` before and after). The
admin state lives under the sidecar's state directory: a host started
again (``tools/cloud host start``) keeps its devices enabled.
"""

import json
import os
import subprocess
import time

from localcloud import procs

CLI = 'nova-cyborg-sidecar-manage'


def sidecar_config(layout, host):
    """The host's sidecar configuration (written by ``hosts.launch``)."""
    return layout.path('etc', 'nova-cyborg', host + '-sidecar.conf')


def manage(layout, host, *args):
    """Run the host CLI against the host's running sidecar; its JSON."""
    argv = [layout.bin(CLI), '--config-file',
            sidecar_config(layout, host)] + list(args) + ['-f', 'json']
    proc = subprocess.run(argv, capture_output=True, text=True)
    if proc.returncode:
        raise procs.ServiceError(host, '%s %s failed: %s' % (
            CLI, ' '.join(args), proc.stderr.strip()),
            procs.log_path(layout, host))
    return json.loads(proc.stdout)


def _wait_listed(layout, host, proc, deadline, sleep=0.5):
    """The host's devices once its sidecar has reconciled Placement (the
    host's ready file) and serves its control socket."""
    ready = layout.path('hosts', host, 'ready')
    while True:
        if proc is not None and proc.poll() is not None:
            raise procs.ServiceError(host, 'exited with %s' % proc.returncode,
                                     procs.log_path(layout, host))
        if os.path.exists(ready):
            devices = manage(layout, host, 'device', 'list')
            if len(devices) >= layout.pfs:
                return devices
        if time.monotonic() > deadline:
            raise procs.ServiceError(host, 'its sidecar did not list %d '
                                     'devices' % layout.pfs,
                                     procs.log_path(layout, host))
        time.sleep(sleep)


def _show(out, row):
    out('    %s: enabled %s, held %s, reservation %s' % (
        row['device'], row['enabled'],
        ', '.join(sorted(row.get('held') or {})) or '-',
        ', '.join('%s %s/%s' % (name, inv.get('reserved'), inv.get('total'))
                  for name, inv in sorted(
                      (row.get('reservation') or {}).items()))))


def enable_new(layout, started, out=print, timeout=300):
    """Enable the devices waiting for admission on the hosts of
    ``started`` (``{host: Popen}``, or None for a host started elsewhere
    (``hosts.start``) whose exit is not watched here); returns how many
    were enabled."""
    deadline = time.monotonic() + timeout
    enabled = 0
    shown = False
    for host in sorted(started):
        for row in _wait_listed(layout, host, started[host], deadline):
            if 'new' not in (row.get('held') or {}):
                continue
            if not shown:
                out('  %s device list (new devices are admitted disabled):'
                    % host)
                _show(out, row)
                out('  $ %s --config-file %s device enable %s' % (
                    CLI, sidecar_config(layout, host), row['device']))
            after = manage(layout, host, 'device', 'enable', row['device'])
            if not shown:
                _show(out, after)
                shown = True
            enabled += 1
    return enabled
