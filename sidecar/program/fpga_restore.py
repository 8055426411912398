"""The FPGA functions of Bound ARQs loaded again after a host reboot.

A cold boot configures each FPGA from its flash: every DFL port's PR
region holds its card's default AFU again, and the ports are under the PF
until the boot's configuration releases them to their VFs (Intel PAC
D5005 / N3000 user guides; drivers/fpga/dfl.c
``dfl_fpga_feature_devs_enumerate``; :func:`sidecar_simulator.kernel.
reboot`). A server's ARQ stays Bound to its port's provider, and
cyborg-conductor programs only at bind: nothing loaded the server's
function again, and Nova's check before spawn found the port without it.

So, before the sidecar's first report after it starts (and so before
Nova starts the guests of this host), :meth:`Reprogrammer.restore_bound`
looks at each Bound ARQ of this host on an FPGA deployable the sidecar
reports, and works out the bitstream its device profile group asks as
cyborg-conductor does at bind (``FPGAExtARQ.get_bitstream_md``): its
``accel:bitstream_id``, or the one Glance image whose
``accel:function_id`` is the group's. A port that does not hold that
image's function is programmed with it through the same job as
``fpga_program`` (:meth:`sidecar.program.manager.ProgramManager._program`:
journaled, its provider reserved meanwhile, the programmer of its driver,
the port assigned back to the PF around the load where SR-IOV serves it,
the function read back, the provider's function trait set). A group asking
no bitstream or function (a trait, or nothing) is left as it is: nothing
says which bitstream to load.

It runs at every start of the sidecar (which a host reboot implies) until
it has succeeded once; a port already holding its function costs nothing.
Anything that fails (Cyborg or Glance unreadable, the load refused, a
running domain holding the port) is logged and tried again next cycle;
meanwhile the port's provider stays allocated to its server (nothing else
is scheduled there) and carries the function the port holds, so Nova's
check before spawn refuses to start the guest on the wrong function.
"""

from oslo_log import log as logging

from sidecar import exception
from sidecar.program import cyborg as cyborg_api
from sidecar.program import promises
from sidecar.report import reporter as report

LOG = logging.getLogger(__name__)


class _Skip(Exception):
    """This ARQ asks nothing the sidecar can load."""


class Reprogrammer:
    """:meth:`restore_bound` of :class:`sidecar.program.manager.
    ProgramManager` (which it is mixed into)."""

    #: Whether :meth:`restore_bound` is still to succeed once.
    _restore_pending = True

    def restore_functions(self):
        """Every cycle, before the report: :meth:`restore_bound` until it
        has succeeded once since the sidecar started."""
        if self._restore_pending and self._cyborg is not None:
            self._restore_pending = not self.restore_bound()

    def restore_bound(self):
        """Load each FPGA deployable of this host that a Bound ARQ holds
        with the function its device profile group asks, where it does
        not hold it. Returns True when nothing is left to do."""
        try:
            arqs = cyborg_api.bound_arqs(self._cyborg, self._host)
        except exception.SidecarError as exc:
            LOG.warning('Cannot read the ARQs (%s): the FPGA functions of '
                        'Bound ARQs are checked next cycle', exc)
            return False
        bound = [arq for arq in arqs if arq.get('device_rp_uuid')]
        if not bound:
            return True
        try:
            deployables = self._fpga_providers()
        except exception.SidecarError as exc:
            LOG.warning('Cannot read the providers of this host\'s FPGAs '
                        '(%s): the functions of Bound ARQs are checked '
                        'next cycle', exc)
            return False
        done, profiles = True, {}
        for arq in bound:
            found = deployables.get(arq['device_rp_uuid'])
            if found is None:
                continue  # not an FPGA deployable of this host
            try:
                done = self._restore(arq, found[0], found[1],
                                     profiles) and done
            except _Skip:
                continue
            except exception.SidecarError as exc:
                LOG.error('ARQ %(arq)s: loading its FPGA function on '
                          '%(dep)s again failed: %(exc)s; tried again next '
                          'cycle (its provider stays allocated to its '
                          'server and names the function the port holds)',
                          {'arq': arq.get('uuid'), 'dep': found[1],
                           'exc': exc})
                done = False
        return done

    def _fpga_providers(self):
        """``{provider uuid: (card address, deployable name)}`` of the
        FPGA deployables this host reports."""
        found = {}
        for device in self._inventory.devices():
            if device.type != 'FPGA':
                continue
            for dep in device.deployables:
                rp = self._placement.find_provider(
                    report.deployable_name(self._host, dep))
                if rp is not None:
                    found[rp] = (device.address, dep.name)
        return found

    def _asked(self, arq, profiles):
        """``(image id, its metadata, function id)`` of the bitstream
        ``arq``'s device profile group asks, as cyborg-conductor finds it
        at bind. Raises _Skip when it asks none."""
        name = arq.get('device_profile_name')
        if name not in profiles:
            profiles[name] = self._cyborg.device_profile(name)
        groups = profiles[name].get('groups')
        index = arq.get('device_profile_group_id')
        if (not isinstance(groups, list) or not isinstance(index, int) or
                not 0 <= index < len(groups) or
                not isinstance(groups[index], dict)):
            raise exception.CyborgError(
                reason='ARQ %s names group %r of device profile %s, which '
                       'has no such group' % (arq.get('uuid'), index, name))
        group = groups[index]
        image_id = group.get(promises.BITSTREAM_KEY)
        function_id = group.get(promises.FUNCTION_KEY)
        if image_id:
            metadata = self._images.get_metadata(str(image_id))
        elif function_id:
            metadata = self._images.find_by_function(str(function_id))
        else:
            raise _Skip()
        function_id = self._images.function_id(metadata)
        if (not isinstance(function_id, str) or
                not promises.FUNCTION_ID_RE.match(function_id)):
            raise exception.BitstreamError(
                image_id=metadata.get('id'),
                reason='its accel:function_id %r cannot name a trait' %
                (function_id,))
        return str(metadata.get('id')), metadata, function_id

    def _restore(self, arq, card, name, profiles):
        """Load the deployable ``name`` of ``card`` with what ``arq`` asks
        if it does not hold it; False when it is left for next cycle."""
        device = self._inventory.device(card)
        dep = next((d for d in (device.deployables if device else ())
                    if d.name == name), None)
        if dep is None:
            return False
        image_id, metadata, function_id = self._asked(arq, profiles)
        wanted = promises.function_trait(dep.driver_name, function_id)
        if wanted in self._loaded_traits(dep):
            return True
        running = self._domains.devices_running()
        addresses = {h.address for h in dep.attach_handles} | {dep.name}
        users = sorted({running[a] for a in addresses if a in running})
        if users:
            LOG.warning('%(dep)s does not hold %(trait)s, the function of '
                        'Bound ARQ %(arq)s, and domain(s) %(users)s run '
                        'with it: it is loaded once they stop',
                        {'dep': name, 'trait': wanted, 'arq': arq['uuid'],
                         'users': ', '.join(users)})
            return False
        LOG.warning('%(dep)s holds %(now)s, not %(trait)s of Bound ARQ '
                    '%(arq)s (host reboot, or the card reset): loading '
                    'bitstream %(image)s again before its guest starts',
                    {'dep': name, 'arq': arq['uuid'], 'trait': wanted,
                     'image': image_id, 'now': ', '.join(sorted(
                         self._loaded_traits(dep))) or 'no function'})
        with self._lock(card):
            device = self._inventory.refresh_device(card)
            dep = next((d for d in (device.deployables if device else ())
                        if d.name == name), None)
            if dep is None:
                return False
            if wanted in self._loaded_traits(dep):
                return True
            providers = self._providers(device, [dep])
            self._promises.check(dep.name, providers, wanted,
                                 self._loaded_traits(dep))
            self._program(device, dep, providers, image_id, metadata,
                          wanted, dep.driver_name)
        return True
