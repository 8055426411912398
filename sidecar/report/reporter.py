"""Turn discovered devices into Cyborg's wire objects, and send them only
when they changed.

cyborg-agent sends its full device list every minute, and cyborg-conductor
reads its whole database to diff it each time. The sidecar sends the list at
start, when a cycle finds a change, after a failed send, when the
reconciler (:mod:`sidecar.report.reconcile`) finds a provider missing in
Placement,
on SIGHUP, and every ``[sidecar] resync_interval`` seconds if set; a cycle
with no change sends nothing.

The list goes out as the ``DriverDevice`` version of ``[upgrade_levels]
cyborg_conductor`` (default the latest, 1.4 of Cyborg 17): Cyborg 16's
conductor refuses a newer version, and a device type its version lacks.
Such a device goes as the type that release's own agent gives it (the
``pci`` driver's as ``GPU``, :data:`sidecar.report.objects.OLDER_TYPES`)
or, with none, is left out, with a warning.
"""

import hashlib
import time

from oslo_log import log as logging
import oslo_messaging as messaging
from oslo_serialization import jsonutils

from sidecar import model
from sidecar.report import objects

LOG = logging.getLogger(__name__)

#: Traits that change when a device is reprogrammed or its health changes
#: (:mod:`sidecar.discovery.health`). cyborg-conductor diffs attributes by key
#: (``trait0``..``traitN``); keeping these after the static traits means
#: such a change touches one key and no other trait.
DYNAMIC_TRAIT_PREFIXES = ('CUSTOM_FPGA_FUNCTION_ID', 'CUSTOM_HEALTH_')


def _trait_order(trait):
    return (trait.startswith(DYNAMIC_TRAIT_PREFIXES), trait)


def deployable_name(host, deployable):
    """The name cyborg-conductor gives the deployable's resource provider."""
    return '%s_%s' % (host, deployable.name)


def _controlpath(address):
    domain, bus, slot, function = model.parse_bdf(address)
    return objects.DriverControlPathID(
        cpid_type='PCI',
        cpid_info=objects.dumps_sorted({'domain': domain, 'bus': bus,
                                        'device': slot,
                                        'function': function}))


def _deployable(host, dep):
    attributes = [objects.DriverAttribute(key='rc', value=dep.resource_class)]
    for index, trait in enumerate(sorted(set(dep.traits), key=_trait_order)):
        attributes.append(
            objects.DriverAttribute(key='trait%d' % index, value=trait))
    handles = [
        objects.DriverAttachHandle(
            attach_type=handle.attach_type,
            attach_info=objects.dumps_sorted(handle.attach_info()),
            in_use=False)
        for handle in dep.attach_handles]
    return objects.DriverDeployable(
        name=deployable_name(host, dep),
        num_accelerators=dep.num_accelerators,
        driver_name=dep.driver_name or None,
        attribute_list=attributes,
        attach_handle_list=handles)


def to_wire(host, devices):
    """Return the ``DriverDevice`` list cyborg-conductor's report_data takes.

    Devices are sorted by control path so that equal inventories give equal
    lists.
    """
    result = []
    for device in sorted(devices, key=lambda d: d.address):
        result.append(objects.DriverDevice(
            vendor=device.vendor,
            model=device.model,
            type=device.type,
            std_board_info=jsonutils.dumps(dict(device.std_board_info),
                                           sort_keys=True),
            vendor_board_info=None,
            controlpath_id=_controlpath(device.address),
            deployable_list=[_deployable(host, dep)
                             for dep in device.deployables],
            stub=False))
    return result


def digest(wire_devices, version=None):
    """A stable digest of what a report would send (as ``version``)."""
    return _digest_primitives(objects.to_primitives(
        wire_devices, version or objects.DriverDevice.VERSION))


def _digest_primitives(primitives):
    blob = jsonutils.dumps(primitives, sort_keys=True).encode('utf-8')
    return hashlib.sha256(blob).hexdigest()


class Reporter:
    """Send ``report_data`` when, and only when, it is needed."""

    def __init__(self, conductor, host, rp_name, resync_interval,
                 clock=time.monotonic, pin=None):
        self._conductor = conductor
        self._pin = pin
        #: The ``DriverDevice`` version sent (ValueError for a bad pin).
        self.version = objects.target_version(pin)
        self._left_out = frozenset()
        self._host = host
        self._rp_name = rp_name
        self._resync_interval = resync_interval
        self._clock = clock
        self._sent_digest = None
        self._sent_at = None
        self.sends = 0

    def sendable(self, devices):
        """The devices cyborg-conductor's version can hold. A device of a
        type it lacks, with no older type to go as, is left out, with a
        WARNING when it first is."""
        kept = [d for d in devices
                if objects.wire_type(d.type, self.version)]
        left = [d for d in devices
                if not objects.wire_type(d.type, self.version)]
        for device in left:
            if (device.address, device.type) in self._left_out:
                continue
            LOG.warning(
                'Device %(address)s (%(type)s %(vendor)s:%(model)s) is left '
                'out of the report to cyborg-conductor, with its '
                'deployable(s) %(deps)s: [upgrade_levels] cyborg_conductor '
                '= %(pin)s sends DriverDevice %(version)s, which has no '
                'device type %(type)s; it is reported once the conductor '
                'is upgraded and the option raised',
                {'address': device.address, 'type': device.type,
                 'vendor': device.vendor, 'model': device.model,
                 'deps': ', '.join(deployable_name(self._host, dep)
                                   for dep in device.deployables) or 'none',
                 'pin': self._pin, 'version': self.version})
        self._left_out = frozenset((d.address, d.type) for d in left)
        return kept

    def invalidate(self):
        """Forget what was sent: the next ``report`` sends in any case."""
        self._sent_digest = None

    def _due(self, current):
        if current != self._sent_digest:
            return True
        if not self._resync_interval:
            return False
        return self._clock() - self._sent_at >= self._resync_interval

    def report(self, context, devices, prepare=None):
        """Send ``devices`` if needed, calling ``prepare(devices)`` just
        before. Returns True if a report was sent.

        A failed send raises; the next call sends again.
        """
        devices = self.sendable(devices)
        wire = objects.to_primitives(to_wire(self._host, devices),
                                     self.version)
        current = _digest_primitives(wire)
        if not self._due(current):
            return False
        self._sent_digest = None
        if prepare is not None:
            prepare(devices)
        LOG.info('Reporting %(n)d device(s) of %(host)s to cyborg-conductor',
                 {'n': len(wire), 'host': self._rp_name})
        try:
            self._conductor.report_data(context, self._rp_name, wire)
        except messaging.RemoteError as exc:
            if exc.exc_type == 'IncompatibleObjectVersion':
                LOG.error('cyborg-conductor cannot read DriverDevice '
                          '%(version)s (%(error)s): set [upgrade_levels] '
                          'cyborg_conductor to its release (2026.1 for '
                          'Cyborg 16) or to the version it supports',
                          {'version': self.version, 'error': exc.value})
            raise
        self._sent_digest = current
        self._sent_at = self._clock()
        self.sends += 1
        return True
