"""cyborg-conductor's ``bitstream_id`` of an FPGA stays true.

cyborg-conductor 17 records which bitstream a deployable holds
(``deployable.bitstream_id``) only after a programming it asked for in an
ARQ bind, and a later bind asking that same bitstream skips the programming
(``FPGAExtARQ._needs_programming``): the sidecar is not even called. Every
other programming leaves the record as it was: Cyborg's own
``PATCH /v2/deployables/{uuid}/program`` (it calls ``fpga_program`` and
never writes the field), a job interrupted and finished by
:meth:`sidecar.program.manager.ProgramManager.recover`, a card reprogrammed
out of
band. The record then names a bitstream the card no longer holds, and a
bind asking it would give a server a card holding another function.

Cyborg has no API to write the field. What resets it is a public interface
the sidecar already uses: a report. A deployable left out of one report is
destroyed by the conductor (its provider deleted), and one that appears is
created with ``bitstream_id`` None, after which every bind asks the sidecar,
which knows what the card holds and answers "already holds" without
programming when it does.

So the :class:`ConductorView` compares, for each FPGA whose loaded function
may have changed (at start, after each ``fpga_program`` the sidecar served,
and whenever discovery sees the function change, whoever changed it), the
function the conductor's ``bitstream_id`` names (its Glance image's
``accel:function_id``) with the function the card holds. A record that
differs is logged with the deployable's name and UUID, and re-registered
(left out of one report, then reported again) once the card is idle: no
programming job on it, no Placement allocation on its providers, no ARQ
bound or binding to them. While it is not idle the record stays as it is
and is checked again each cycle; Nova's check before spawn refuses a card
whose function trait does not match the profile meanwhile.

Both reports are sent inside one discovery cycle, before the reconciler
checks Placement: the provider is absent only between them. A scheduler
claiming on it in that instant makes the conductor's provider delete fail
(HTTP 409, the report answers an error); the second report adds the
deployable back with ``bitstream_id`` None, on the provider that kept the
claim.
"""

import dataclasses

from oslo_log import log as logging

from sidecar import exception
from sidecar.program import manager as program
from sidecar.report import reporter as report

LOG = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Lie:
    """A deployable whose conductor record names another bitstream."""
    name: str
    uuid: str
    bitstream_id: str
    #: The function trait the recorded bitstream's image names (or None
    #: when its accel:function_id cannot name one).
    records: object
    #: The function traits the card holds.
    holds: frozenset

    def __str__(self):
        return ('deployable %s (%s): cyborg-conductor records bitstream %s '
                '(%s), the card holds %s' % (
                    self.name, self.uuid, self.bitstream_id,
                    self.records or 'no valid function',
                    ', '.join(sorted(self.holds)) or 'no function'))


class _Unknown(Exception):
    """What the conductor records cannot be compared now."""


def loaded_functions(device):
    """The function traits each deployable of ``device`` holds."""
    prefix = program.FUNCTION_TRAIT_PREFIX
    return {dep.name: frozenset(t for t in dep.traits
                                if t.startswith(prefix))
            for dep in device.deployables}


class ConductorView:
    """Keep cyborg-conductor's ``bitstream_id`` of this host's FPGAs true.

    :param host: ``[DEFAULT] host`` (deployable names start with it).
    :param cyborg: a :class:`sidecar.program.cyborg.AcceleratorClient`.
    :param images: a :class:`sidecar.program.glance.ImageClient`.
    :param placement: a :class:`sidecar.report.placement.PlacementClient`.
    :param idle: ``idle(address)``, the programs' context manager that
        yields True and holds the device while no job runs on it.
    """

    def __init__(self, host, cyborg, images, placement, idle):
        self._host = host
        self._cyborg = cyborg
        self._images = images
        self._placement = placement
        self._idle = idle
        #: address -> loaded_functions() when last checked.
        self._seen = {}
        #: Addresses to compare with the conductor's records.
        self._dirty = set()
        #: Lies already logged at WARNING.
        self._logged = set()
        self._functions = {}
        self.repairs = 0

    def invalidate(self):
        """Compare every FPGA again at the next :meth:`check` (after a
        programming the sidecar served, or a restored conductor)."""
        self._dirty.update(self._seen)
        self._seen = {}

    def pending(self):
        """The addresses still to compare or to repair."""
        return set(self._dirty)

    def check(self, devices, send):
        """Compare and repair; returns ``{address: [Lie]}`` left unrepaired.

        :param devices: the devices discovered in this cycle.
        :param send: ``send(devices)`` reports exactly ``devices`` to the
            conductor now (raises if the conductor answered an error).
        """
        fpgas = {d.address: d for d in devices if d.type == 'FPGA'}
        for address, device in fpgas.items():
            now = loaded_functions(device)
            if self._seen.get(address) != now:
                self._dirty.add(address)
            self._seen[address] = now
        for address in set(self._seen) - set(fpgas):
            del self._seen[address]
        self._dirty &= set(fpgas)
        if not self._dirty:
            return {}
        try:
            records = self._records()
        except exception.SidecarError as exc:
            LOG.warning('Cannot read the deployables cyborg-conductor '
                        'records: %s; compared again next cycle', exc)
            return {}
        left = {}
        for address in sorted(self._dirty):
            device = fpgas[address]
            try:
                lies = self._lies(device, records)
            except _Unknown as exc:
                LOG.warning('Cannot compare what cyborg-conductor records '
                            'for %(addr)s with the card: %(exc)s; compared '
                            'again next cycle', {'addr': address, 'exc': exc})
                continue
            if not lies:
                self._dirty.discard(address)
                continue
            for lie in lies:
                if lie not in self._logged:
                    self._logged.add(lie)
                    LOG.warning('%s: a bind asking that bitstream would not '
                                'program the card. It is registered again '
                                'once no server holds the card', lie)
            if self._repair(device, lies, devices, send):
                self._dirty.discard(address)
                self.repairs += 1
            else:
                left[address] = lies
        return left

    def absent(self, devices):
        """The deployables of ``devices`` cyborg-conductor does not hold.

        Read back after a report: ``report_data`` answers even when the
        conductor dropped a device on a database or Placement error it
        only logs. A deployable it holds without a resource provider is
        logged (a bind on it would fail).
        """
        records = self._records()
        names = {report.deployable_name(self._host, dep)
                 for device in devices for dep in device.deployables}
        for name in sorted(names & set(records)):
            if not records[name].get('rp_uuid'):
                LOG.warning('cyborg-conductor holds deployable %(name)s '
                            '(%(uuid)s) without a resource provider',
                            {'name': name,
                             'uuid': records[name].get('uuid')})
        return sorted(names - set(records))

    # -- comparing ------------------------------------------------------

    def _records(self):
        """``{name: deployable}`` of this host's deployables in Cyborg."""
        prefix = '%s_' % self._host
        return {d['name']: d for d in self._cyborg.deployables()
                if isinstance(d, dict) and
                str(d.get('name') or '').startswith(prefix)}

    def _function(self, bitstream_id):
        """The ``accel:function_id`` of an image (cached: it is what the
        conductor reads once, when it programs)."""
        if bitstream_id not in self._functions:
            try:
                metadata = self._images.get_metadata(bitstream_id)
            except exception.SidecarError as exc:
                raise _Unknown('the image of bitstream %s cannot be read: '
                               '%s' % (bitstream_id, exc))
            self._functions[bitstream_id] = self._images.function_id(
                metadata)
        return self._functions[bitstream_id]

    def _lies(self, device, records):
        held = loaded_functions(device)
        lies = []
        for dep in device.deployables:
            name = report.deployable_name(self._host, dep)
            record = records.get(name)
            bitstream = (record or {}).get('bitstream_id')
            if not bitstream:
                continue  # unknown to the conductor, or it asks each time
            function_id = self._function(str(bitstream))
            wanted = None
            if (isinstance(function_id, str) and dep.driver_name and
                    program._FUNCTION_ID_RE.match(function_id)):
                wanted = program.function_trait(dep.driver_name,
                                                function_id)
            if wanted is None or wanted not in held[dep.name]:
                lies.append(Lie(name, record.get('uuid'), str(bitstream),
                                wanted, held[dep.name]))
        return lies

    # -- repairing ------------------------------------------------------

    def _busy(self, device):
        """Why the card is not idle, or None."""
        providers = {program.provider_uuid(
            report.deployable_name(self._host, dep))
            for dep in device.deployables}
        try:
            for rp in sorted(providers):
                consumers = self._placement.allocations(rp)
                if consumers:
                    return 'consumer(s) %s hold allocations on provider %s' % (
                        ', '.join(sorted(consumers)), rp)
        except exception.SidecarError as exc:
            return 'its allocations cannot be read (%s)' % exc
        try:
            arqs = self._cyborg.all_arqs()
        except exception.SidecarError as exc:
            return 'the accelerator requests cannot be read (%s)' % exc
        bound = sorted(str(arq.get('uuid')) for arq in arqs
                       if isinstance(arq, dict) and
                       arq.get('device_rp_uuid') in providers)
        if bound:
            return 'accelerator request(s) %s are bound to it' % ', '.join(
                bound)
        return None

    def _repair(self, device, lies, devices, send):
        with self._idle(device.address) as idle:
            if not idle:
                LOG.info('%s is being programmed; its conductor record is '
                         'compared again afterwards', device.address)
                return False
            reason = self._busy(device)
            if reason:
                LOG.info('Not registering %(addr)s again yet: %(why)s',
                         {'addr': device.address, 'why': reason})
                return False
            names = {lie.name for lie in lies}
            without = [_without(d, self._host, names)
                       if d.address == device.address else d
                       for d in devices]
            LOG.warning('Registering %(names)s again with cyborg-conductor '
                        'so that it forgets the bitstream it records',
                        {'names': ', '.join(sorted(names))})
            try:
                send(without)
            except Exception as exc:
                # A claim made since the check: the conductor destroyed the
                # deployable but Placement refused to delete the provider.
                LOG.warning('cyborg-conductor did not take the report '
                            'without %(names)s: %(exc)s', {
                                'names': ', '.join(sorted(names)),
                                'exc': exc})
            try:
                send(devices)
            except Exception as exc:
                LOG.warning('Reporting %(names)s again failed: %(exc)s; the '
                            'next cycle reports them', {
                                'names': ', '.join(sorted(names)),
                                'exc': exc})
                return False
        try:
            records = self._records()
        except exception.SidecarError as exc:
            LOG.warning('Cannot read back the re-registered deployables: '
                        '%s', exc)
            return False
        still = sorted(n for n in names
                       if (records.get(n) or {}).get('bitstream_id'))
        missing = sorted(n for n in names if n not in records)
        if still or missing:
            LOG.warning('After registering them again, cyborg-conductor '
                        'still records a bitstream for %(still)s and lacks '
                        '%(missing)s', {'still': still or 'none',
                                        'missing': missing or 'none'})
            return False
        for name in sorted(names):
            LOG.info('cyborg-conductor records no bitstream for %(name)s '
                     'now (deployable %(uuid)s): binds ask the sidecar', {
                         'name': name, 'uuid': records[name].get('uuid')})
        return True


def _without(device, host, names):
    """``device`` without the deployables named ``names``."""
    return dataclasses.replace(device, deployables=tuple(
        dep for dep in device.deployables
        if report.deployable_name(host, dep) not in names))
