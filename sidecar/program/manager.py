"""FPGA programming without the race of seed 004.

For one device, programming requests are serialized. A device is never
reprogrammed while a domain on this host uses one of its attach handles
(libvirt is asked each time), nor while a consumer holding a Placement
allocation on one of its providers relies on what it holds
(:mod:`sidecar.program.promises`): the allocation is the promise, from
scheduling
until the server is gone, whether or not the sidecar programmed the card for
it. While a device is programmed its resource providers
offer nothing (``reserved = total``); afterwards the function trait names
the loaded bitstream. A job in flight is journaled, so a sidecar killed
mid-programming undoes the reservation and sets the trait to what the device
really holds when it comes back. The end of a job gives the providers back
as the sidecar owns them: ``reserved`` 0, or ``total`` while the device is
held (:mod:`sidecar.state.holds`): a restore never erases an operator's disable
made before or during the job.

A card with several regions (:mod:`sidecar.drivers.fpga`) is programmed
region by region: only the region's provider is reserved, checked for
consumers and given the new function trait, and only its attach handles
are looked for in domains. cyborg-conductor's ``fpga_program`` names the
card alone (its control path); the region is the one whose provider an
ARQ being bound (``BindStarted``) that asks the function is bound to
(:meth:`sidecar.program.promises.PromiseChecker.binding`). A control path that
is
a region's function (its VF) names that region.
"""

import contextlib
import os
import re
import threading
import time
import uuid

from oslo_log import log as logging
from oslo_utils import uuidutils

from sidecar import exception
from sidecar.program import fpga_restore
from sidecar.program import promises
from sidecar.report import reporter as report

LOG = logging.getLogger(__name__)

FUNCTION_TRAIT_PREFIX = promises.FUNCTION_TRAIT_PREFIX
_FUNCTION_ID_RE = promises.FUNCTION_ID_RE
_DRIVER_NAME_RE = re.compile(r'^[A-Za-z0-9_]{1,32}$')
_HEX_RE = re.compile(r'^(0x)?[0-9a-fA-F]{1,4}$')


function_trait = promises.function_trait


def provider_uuid(name):
    """cyborg-conductor's provider UUID for a deployable name."""
    return str(uuid.uuid3(uuid.NAMESPACE_DNS, name))


def _cpid_address(controlpath_id):
    """The PCI address in cyborg-conductor's controlpath_id argument."""
    if not isinstance(controlpath_id, dict):
        raise exception.InvalidArgument(name='controlpath_id',
                                        reason='not an object')
    if controlpath_id.get('cpid_type') != 'PCI':
        raise exception.InvalidArgument(
            name='controlpath_id', reason='cpid_type is not PCI')
    info = controlpath_id.get('cpid_info')
    if not isinstance(info, dict):
        raise exception.InvalidArgument(name='controlpath_id',
                                        reason='cpid_info is not an object')
    widths = (('domain', 4), ('bus', 2), ('device', 2), ('function', 1))
    parts = []
    for key, width in widths:
        value = info.get(key)
        if not isinstance(value, str) or not _HEX_RE.match(value):
            raise exception.InvalidArgument(
                name='controlpath_id',
                reason='%s is not a hexadecimal number' % key)
        number = int(value, 16)
        if number >= 16 ** width or (key == 'function' and number > 7):
            raise exception.InvalidArgument(
                name='controlpath_id', reason='%s is out of range' % key)
        parts.append('%0*x' % (width, number))
    return '%s:%s:%s.%s' % tuple(parts)


@contextlib.contextmanager
def held_if_free(lock):
    """Yield False while ``lock`` is held (a job runs); otherwise hold it
    meanwhile and yield True."""
    if not lock.acquire(blocking=False):
        yield False
        return
    try:
        yield True
    finally:
        lock.release()


class ProgramManager(fpga_restore.Reprogrammer):
    """Serve ``fpga_program`` for the FPGAs this host reported; load the
    functions of Bound ARQs again after a host reboot
    (:meth:`restore_functions`)."""

    def __init__(self, host, inventory, programmer, images, placement,
                 domains, journal, cyborg, clock=time.time, holds=None):
        self._host = host
        self._inventory = inventory
        self._programmer = programmer
        self._images = images
        self._placement = placement
        self._domains = domains
        self._journal = journal
        self._cyborg = cyborg
        self._promises = promises.PromiseChecker(placement, cyborg, images)
        self._clock = clock
        self._holds = holds
        self._locks = {}
        self._locks_guard = threading.Lock()

    def _lock(self, address):
        with self._locks_guard:
            return self._locks.setdefault(address, threading.Lock())

    #: The lock of the card at an address, for other jobs on cards (a
    #: vGPU 17 type set at bind): :meth:`busy` sees them too.
    lock_for = _lock

    def busy(self):
        """True while any device is being programmed: a report then
        would make cyborg-conductor rewrite that device's inventory
        without its reservation."""
        with self._locks_guard:
            locks = list(self._locks.values())
        return any(lock.locked() for lock in locks)

    def held(self, address):
        return bool(self._holds and self._holds.held(address))

    def busy_with(self, address):
        """True while ``address`` is being programmed."""
        with self._locks_guard:
            lock = self._locks.get(address)
        return bool(lock and lock.locked())

    def domains_in_use(self):
        """``{PCI address: domain name}`` of the devices domains use."""
        return self._domains.devices_in_use()

    def jobs(self):
        """The journal: ``[(address, job)]`` started and not finished."""
        return self._journal.jobs.items()

    def idle(self, address):
        """Yield False while ``address`` is being programmed; otherwise
        hold it (no job starts) and yield True."""
        return held_if_free(self._lock(address))

    # -- checks ---------------------------------------------------------

    def _fpga(self, address, driver_name):
        """``(device, region)``: the card ``address`` names, and the name
        of its deployable when ``address`` is a region's function (None
        when it is the card's control path)."""
        device, region = self._inventory.device(address), None
        if device is None:
            device = next((d for d in self._inventory.devices()
                           if len(d.deployables) > 1 and
                           any(dep.name == address
                               for dep in d.deployables)), None)
            region = address
        if device is None or device.type != 'FPGA':
            raise exception.UnknownDevice(kind='FPGA', address=address)
        names = {dep.driver_name for dep in device.deployables}
        if driver_name not in names:
            raise exception.InvalidArgument(
                name='driver_name',
                reason='%s does not drive %s' % (driver_name, address))
        return device, region

    def _region(self, device, region, wanted):
        """The deployable to program for ``wanted``, or None when the
        region asked for holds it already."""
        deps = {dep.name: dep for dep in device.deployables}
        if region is None and len(deps) > 1:
            providers = self._providers(device)
            by_rp = {self._placement.find_provider(
                report.deployable_name(self._host, dep)): dep.name
                for dep in device.deployables}
            names = sorted(by_rp[rp] for rp in
                           self._promises.binding(device.address, providers,
                                                  wanted))
            if not names:
                raise exception.InvalidArgument(
                    name='controlpath_id',
                    reason='%s has %d regions and no accelerator request '
                           'being bound to one of them asks for %s: name '
                           'the region by the address of its function, or '
                           'program it through a server\'s accelerator '
                           'request' % (
                               device.address, len(deps), wanted))
            todo = [n for n in names
                    if wanted not in self._loaded_traits(deps[n])]
            LOG.info('%(card)s: the region(s) being bound for %(trait)s: '
                     '%(names)s', {'card': device.address, 'trait': wanted,
                                   'names': ', '.join(names)})
            region = (todo or names)[0]
        dep = deps[region or next(iter(deps))]
        return None if wanted in self._loaded_traits(dep) else dep

    @staticmethod
    def _loaded_traits(deployable):
        return {t for t in deployable.traits
                if t.startswith(FUNCTION_TRAIT_PREFIX)}

    def _users(self, deployable):
        in_use = self._domains.devices_in_use()
        addresses = {h.address for h in deployable.attach_handles}
        addresses.add(deployable.name)
        return sorted({name for dev, name in in_use.items()
                       if dev in addresses})

    def _check_free(self, device, dep, providers, wanted):
        users = self._users(dep)
        if users:
            raise exception.DeviceBusy(
                address=dep.name,
                reason='attach handles used by domain(s) %s' %
                ', '.join(users))
        self._promises.check(dep.name, providers, wanted,
                             self._loaded_traits(dep))

    # -- placement ------------------------------------------------------

    def _providers(self, device, deployables=None):
        """``{provider uuid: driver name}`` of the device's deployables
        (or of ``deployables``)."""
        result = {}
        for dep in deployables or device.deployables:
            name = report.deployable_name(self._host, dep)
            try:
                rp = self._placement.find_provider(name)
            except exception.PlacementError as exc:
                raise exception.DeviceBusy(
                    address=device.address,
                    reason='its providers cannot be read, so it is not '
                           'programmed blind: %s' % exc)
            if rp is None:
                raise exception.PlacementError(
                    reason='no resource provider %s yet' % name)
            result[rp] = dep.driver_name
        return result

    # -- the RPC method -------------------------------------------------

    def fpga_program(self, controlpath_id, bitstream_uuid, driver_name):
        address = _cpid_address(controlpath_id)
        bitstream_uuid = str(bitstream_uuid)
        if not uuidutils.is_uuid_like(bitstream_uuid):
            raise exception.InvalidArgument(name='bitstream_uuid',
                                            reason='not a UUID')
        if (not isinstance(driver_name, str) or
                not _DRIVER_NAME_RE.match(driver_name)):
            raise exception.InvalidArgument(name='driver_name',
                                            reason='not a driver name')
        card = self._fpga(address, driver_name)[0].address
        metadata = self._images.get_metadata(bitstream_uuid)
        function_id = self._images.function_id(metadata)
        if not function_id or not _FUNCTION_ID_RE.match(function_id):
            raise exception.BitstreamError(
                image_id=bitstream_uuid,
                reason='its accel:function_id %r cannot name a trait' %
                (function_id,))
        wanted = function_trait(driver_name, function_id)
        with self._lock(card):
            device, region = self._fpga(address, driver_name)
            dep = self._region(device, region, wanted)
            if dep is None:
                LOG.info('%(addr)s already holds %(trait)s; not '
                         'reprogramming', {'addr': address, 'trait': wanted})
                return True
            providers = self._providers(device, [dep])
            self._check_free(device, dep, providers, wanted)
            self._program(device, dep, providers, bitstream_uuid, metadata,
                          wanted, driver_name)
        return True

    def _program(self, device, dep, providers, image_id, metadata, wanted,
                 driver_name):
        address = device.address
        job = {'image': image_id, 'trait': wanted, 'started': self._clock(),
               'reserved': {}, 'deployable': dep.name}
        self._journal.jobs.put(address, job)
        try:
            for rp in providers:
                job['reserved'][rp] = self._placement.reserve_all(rp)
                self._journal.jobs.put(address, job)
            path = os.path.join(self._journal.path, '%s.bit' % image_id)
            LOG.info('Programming %(addr)s with bitstream %(image)s',
                     {'addr': dep.name, 'image': image_id})
            try:
                self._images.download(image_id, path, metadata)
                self._programmer.program(dep.name, path,
                                         driver_name=driver_name)
            finally:
                if os.path.exists(path):
                    os.unlink(path)
            device = self._inventory.refresh_device(address)
            loaded = self._loaded(device, dep.name)
            if wanted not in loaded:
                raise exception.ProgrammingFailed(
                    address=address,
                    reason='the device reports %s after loading %s' % (
                        ', '.join(sorted(loaded)) or 'no function', wanted))
            for rp in providers:
                self._placement.replace_traits_with_prefix(
                    rp, FUNCTION_TRAIT_PREFIX, [wanted])
            LOG.info('Programmed %(addr)s: it now holds %(trait)s',
                     {'addr': dep.name, 'trait': wanted})
        finally:
            self._finish(address, job)

    def _loaded(self, device, name=None):
        """The function traits of ``device``'s deployable ``name`` (of
        all its deployables without a name)."""
        return {t for dep in (device.deployables if device else ())
                if name is None or dep.name == name
                for t in self._loaded_traits(dep)}

    def _finish(self, address, job):
        """Give the providers back (fully reserved while the device is
        held) and close the journal entry."""
        for rp, previous in job['reserved'].items():
            try:
                if self.held(address):
                    self._placement.reserve_all(rp)
                else:
                    self._placement.restore_reserved(
                        rp, {rc: 0 for rc in previous})
            except exception.SidecarError as exc:
                LOG.error('Could not restore the reservation of provider '
                          '%(rp)s: %(exc)s; it stays reserved and is retried '
                          'next cycle', {'rp': rp, 'exc': exc})
                return
        self._journal.jobs.pop(address)

    # -- start and housekeeping -----------------------------------------

    def recover(self):
        """Undo jobs a killed sidecar left half done, and give back the
        providers of jobs whose end could not reach Placement. Runs every
        cycle; a job in flight is left alone."""
        for address, job in self._journal.jobs.items():
            with self.idle(address) as idle:
                if idle:
                    self._recover(address, job)

    def _recover(self, address, job):
        LOG.warning('Programming of %(addr)s with %(image)s did not '
                    'finish (interrupted, or Placement could not be '
                    'reached at its end); restoring its providers',
                    {'addr': address, 'image': job.get('image')})
        device = self._inventory.refresh_device(address)
        if device is not None:
            loaded = sorted(self._loaded(device, job.get('deployable')))
            for rp in job.get('reserved', {}):
                self._placement.replace_traits_with_prefix(
                    rp, FUNCTION_TRAIT_PREFIX, loaded)
        self._finish(address, job)
