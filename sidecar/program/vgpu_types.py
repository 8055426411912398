"""A vGPU 17 type set on an idle VF at bind, under seed 004's promises.

NVIDIA vGPU 17 and later (vendor-specific VFIO) give a VF its vGPU by
writing a type id from ``<VF>/nvidia/creatable_vgpu_types`` into
``<VF>/nvidia/current_vgpu_type`` (NVIDIA vgpu-device-manager
``pkg/vgpu/vfio/sysfs.go``). The ``gpu`` driver offers an idle VF (type
0) for the first type of ``[gpu] vfio_vgpu_types`` it can host
(:func:`sidecar.drivers.gpu_vfio.offer`), with that type's trait; this
module writes the type when the VF is bound.

The rules are the FPGA programming rules of
:mod:`sidecar.program.manager`:

* one job at a time per card (the card's lock, shared with FPGA
  programming so that no report runs in between); what the card can host
  is read again under the lock, so of two binds asking two types at once
  the second sees the card as the first left it, and is refused cleanly
  when the card no longer lists its type;
* a VF that holds a type never gets another one (only type 0 is
  written over): a type is never changed under a server;
* never while a domain holds the VF, and never against a consumer that
  holds an allocation on the VF's provider and wants another type it
  holds, or whose wish is unknown
  (:class:`sidecar.program.promises.PromiseChecker` over the vGPU type
  traits);
* the write goes through oslo.privsep
  (:func:`sidecar.privileged.set_vgpu_type`, which checks the type is
  creatable again), is read back, and the job is journaled
  (``vgpu_types.json`` beside the programming journal) while it runs, so
  a sidecar killed mid-write logs what the VF holds when it comes back.
"""

import os
import threading
import time
import types

from oslo_log import log as logging

from sidecar import exception
from sidecar import model
from sidecar import privileged
from sidecar.drivers import gpu
from sidecar.drivers import gpu_vfio
from sidecar.program import journal as journal_mod
from sidecar.program import manager
from sidecar.program import promises
from sidecar.report import reporter as report

LOG = logging.getLogger(__name__)

JOURNAL_FILE = 'vgpu_types.json'


def type_trait(vendor_id, product_id, name):
    """The trait the ``gpu`` driver gives a VF of type ``name``."""
    return gpu._name_trait(types.SimpleNamespace(
        vendor_id=vendor_id, product_id=product_id), name, '')


class VgpuTypeSetter:
    """Serve "give VF ``address`` its vGPU type" for this host's cards."""

    def __init__(self, host, sysfs_root, inventory, placement, domains,
                 journal, cyborg, offers, lock_for=None, clock=time.time,
                 write=None):
        self._host = host
        self._root = sysfs_root
        self._inventory = inventory
        self._placement = placement
        self._domains = domains
        self._jobs = journal_mod.JsonStore(
            os.path.join(journal.path, JOURNAL_FILE))
        self._offers = offers
        self._clock = clock
        self._write = write or privileged.set_vgpu_type
        self._lock_for = lock_for or self._own_lock
        self._locks = {}
        self._guard = threading.Lock()
        self._cyborg = cyborg

    def _own_lock(self, address):
        with self._guard:
            return self._locks.setdefault(address, threading.Lock())

    def _vf(self, address):
        """``(card, deployable)`` of the vGPU 17 VF ``address``."""
        for device in self._inventory.devices():
            for dep in device.deployables:
                if dep.name == address and device.type == 'GPU' and any(
                        h.attach_type == 'PCI' and h.managed == 'no'
                        for h in dep.attach_handles):
                    return device, dep
        raise exception.UnknownDevice(kind='vGPU 17 VF', address=address)

    def set_type(self, address, name=None):
        """Give the VF ``address`` the vGPU type ``name`` (None: the type
        it is offered for); return the type id it holds.

        :raises: InvalidArgument (bad address; the card cannot host the
            type now), UnknownDevice, DeviceBusy (a domain, an allocation
            or another type holds it), ProgrammingFailed (the driver
            refused the write or reads back another type).
        """
        try:
            model.parse_bdf(address)
        except ValueError:
            raise exception.InvalidArgument(name='VF address',
                                            reason='not a PCI address')
        card = self._vf(address)[0].address
        with self._lock_for(card):
            device, dep = self._vf(address)
            driver, current, creatable = gpu_vfio.read_state(self._root,
                                                             address)
            if driver != gpu_vfio.NVIDIA_DRIVER or current is None:
                raise exception.DeviceBusy(
                    address=address, reason='it is not a VF on nvidia (%s)'
                    % (driver or 'no driver'))
            by_name = {n: i for i, n in creatable.items()}
            if name is None:
                offered = self._offers.get(device.model, ())
                name = next((n for n in offered if n in by_name), None)
                if name is None and current:
                    return str(current)
            if current:
                if creatable.get(str(current)) == name:
                    LOG.info('VF %(vf)s already holds vGPU type %(name)s',
                             {'vf': address, 'name': name})
                    return str(current)
                raise exception.DeviceBusy(
                    address=address, reason='it holds vGPU type %s, which '
                    'is never changed here' % current)
            if name is None:
                raise exception.InvalidArgument(
                    name='vGPU type', reason='GPU %s lists none of the types '
                    '%s offers on %s now' % (card, gpu_vfio.OFFER_OPTION,
                                             address))
            if name not in by_name:
                raise exception.InvalidArgument(
                    name='vGPU type', reason='GPU %s cannot host %r on %s '
                    'now (nvidia/creatable_vgpu_types lists %s)' % (
                        card, name, address,
                        ', '.join(sorted(by_name)) or 'nothing'))
            self._check_free(device, dep, name)
            self._set(card, address, by_name[name], name)
        self._inventory.refresh_device(card)
        return by_name[name]

    def _check_free(self, device, dep, name):
        users = self._domains.devices_in_use()
        if dep.name in users:
            raise exception.DeviceBusy(
                address=dep.name, reason='used by domain %s' % users[dep.name])
        provider_name = report.deployable_name(self._host, dep)
        try:
            rp = self._placement.find_provider(provider_name)
        except exception.PlacementError as exc:
            raise exception.DeviceBusy(
                address=dep.name, reason='its provider cannot be read, so '
                'no type is set blind: %s' % exc)
        if rp is None:
            raise exception.PlacementError(
                reason='no resource provider %s yet' % provider_name)
        # What a consumer wants of the VF: the type trait of this card's
        # product its profile requires (a NUMA trait beside it is no wish).
        prefix = gpu.gpu_trait(types.SimpleNamespace(
            vendor_id=device.vendor, product_id=device.model)) + '_'
        checker = promises.PromiseChecker(self._placement, self._cyborg,
                                          None, trait_prefix=prefix)
        checker.check(dep.name, {rp: dep.driver_name},
                      type_trait(device.vendor, device.model, name), set())

    def _set(self, card, address, type_id, name):
        job = {'card': card, 'type': type_id, 'name': name,
               'started': self._clock()}
        self._jobs.put(address, job)
        try:
            LOG.info('Setting vGPU type %(id)s (%(name)s) on VF %(vf)s',
                     {'id': type_id, 'name': name, 'vf': address})
            try:
                self._write(self._root, address, type_id)
            except OSError as exc:
                raise exception.ProgrammingFailed(
                    address=address, reason='the driver refused vGPU type '
                    '%s: %s' % (type_id, exc.strerror or exc))
            current = gpu_vfio.read_state(self._root, address)[1]
            if str(current) != type_id:
                raise exception.ProgrammingFailed(
                    address=address, reason='nvidia/current_vgpu_type reads '
                    '%s after writing %s' % (current, type_id))
            LOG.info('VF %(vf)s now holds vGPU type %(name)s',
                     {'vf': address, 'name': name})
        finally:
            self._jobs.pop(address)

    def jobs(self):
        """``[(VF address, job)]`` started and not finished."""
        return self._jobs.items()

    def recover(self):
        """Close the jobs a killed sidecar left, saying what each VF holds
        (a type is never undone: a server may have it by now)."""
        for address, job in self._jobs.items():
            with self._idle(job.get('card')) as idle:
                if not idle:
                    continue
                current = gpu_vfio.read_state(self._root, address)[1]
                LOG.warning('Setting vGPU type %(id)s on VF %(vf)s did not '
                            'finish; it holds type %(now)s',
                            {'id': job.get('type'), 'vf': address,
                             'now': current})
                self._jobs.pop(address)

    def _idle(self, card):
        return manager.held_if_free(self._lock_for(card))
