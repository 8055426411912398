"""The libvirt driver's side of addAccelerator and removeAccelerator:
nova_cyborg.virt.hotplug."""

from unittest import mock

from nova.compute import vm_states
from nova import exception as nova_exception
from nova import objects
from nova import test
from oslo_utils.fixture import uuidsentinel as uuids

from nova_cyborg.virt import hotplug

ARQS = [{'uuid': uuids.arq}]


class HotplugTest(test.NoDBTestCase):

    def setUp(self):
        super().setUp()
        self.driver = mock.Mock()
        self.guest = self.driver._host.get_guest.return_value
        self.guest.is_active.return_value = True
        self.instance = objects.Instance(uuid=uuids.inst,
                                         vm_state=vm_states.ACTIVE)
        self.context = mock.sentinel.context

    @mock.patch('nova_cyborg.virt.guard.checked_guest')
    @mock.patch('nova_cyborg.virt.libvirt.attach_pci_hostdevs')
    def test_running_guest_gets_them_plugged_and_defined(
            self, plug, checked):
        hotplug.attach(self.driver, self.context, self.instance, ARQS)
        plug.assert_called_once_with(self.guest, ARQS, persistent=True)
        checked.assert_not_called()

    @mock.patch('nova_cyborg.virt.guard.checked_guest')
    @mock.patch('nova_cyborg.virt.libvirt.remove_pci_hostdevs')
    def test_running_guest_gets_them_unplugged(self, unplug, checked):
        hotplug.detach(self.driver, self.context, self.instance, ARQS)
        unplug.assert_called_once_with(self.driver, self.guest,
                                       self.instance, ARQS)
        checked.assert_not_called()

    @mock.patch('nova_cyborg.virt.libvirt.attach_pci_hostdevs')
    @mock.patch('nova_cyborg.virt.guard.checked_guest')
    def test_stopped_guest_is_redefined(self, checked, plug):
        self.instance.vm_state = vm_states.STOPPED
        hotplug.attach(self.driver, self.context, self.instance, ARQS)
        hotplug.detach(self.driver, self.context, self.instance, [])
        self.assertEqual([
            mock.call(self.driver, self.context, self.instance, self.guest,
                      asked='addAccelerator'),
            mock.call(self.driver, self.context, self.instance, self.guest,
                      asked='removeAccelerator')], checked.call_args_list)
        plug.assert_not_called()

    @mock.patch('nova_cyborg.virt.guard.checked_guest')
    def test_no_definition_nothing_to_redefine(self, checked):
        self.instance.vm_state = vm_states.STOPPED
        self.driver._host.get_guest.side_effect = (
            nova_exception.InstanceNotFound(instance_id=uuids.inst))
        hotplug.attach(self.driver, self.context, self.instance, ARQS)
        checked.assert_not_called()

    @mock.patch('nova_cyborg.virt.libvirt.remove_pci_hostdevs')
    @mock.patch('nova_cyborg.virt.libvirt.attach_pci_hostdevs')
    @mock.patch('nova_cyborg.virt.guard.checked_guest')
    def test_active_server_whose_guest_shut_down_is_redefined(
            self, checked, plug, unplug):
        # Nova still says ACTIVE; libvirt's domain is not running: there
        # is nothing live to plug into, its definition is what counts.
        self.guest.is_active.return_value = False
        hotplug.attach(self.driver, self.context, self.instance, ARQS)
        hotplug.detach(self.driver, self.context, self.instance, [])
        self.assertEqual([
            mock.call(self.driver, self.context, self.instance, self.guest,
                      asked='addAccelerator'),
            mock.call(self.driver, self.context, self.instance, self.guest,
                      asked='removeAccelerator')], checked.call_args_list)
        plug.assert_not_called()
        unplug.assert_not_called()

    @mock.patch('nova_cyborg.virt.libvirt.attach_pci_hostdevs')
    @mock.patch('nova_cyborg.virt.guard.checked_guest')
    def test_active_server_without_definition_gets_them_at_next_build(
            self, checked, plug):
        self.driver._host.get_guest.side_effect = (
            nova_exception.InstanceNotFound(instance_id=uuids.inst))
        hotplug.attach(self.driver, self.context, self.instance, ARQS)
        checked.assert_not_called()
        plug.assert_not_called()
