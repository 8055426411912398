"""Checks nova-api makes before the accelerator actions reach the compute."""

from nova import test

from nova_cyborg import attach_api
from nova_cyborg import exception
from nova_cyborg import request_groups
from nova_cyborg import rpc


class RecordableTest(test.NoDBTestCase):

    def groups(self, rc='FPGA', amount=1):
        return request_groups.build_request_groups(
            [{'resources:%s' % rc: str(amount)}])

    def test_fits(self):
        # "<profile> <rp uuid> FPGA 1" is 255 characters.
        attach_api.check_recordable('p' * 211, self.groups())

    def test_long_name_is_refused_with_the_limit(self):
        exc = self.assertRaises(exception.DeviceProfileError,
                                attach_api.check_recordable, 'p' * 212,
                                self.groups())
        self.assertIn('need 256 characters, at most 255 fit',
                      exc.format_message())

    def test_long_resource_class_counts(self):
        self.assertRaises(exception.DeviceProfileError,
                          attach_api.check_recordable, 'p' * 20,
                          self.groups(rc='CUSTOM_' + 'X' * 200))


class UnpluggableTest(test.NoDBTestCase):

    def test_pci_may_go_mdev_may_not(self):
        rpc.refuse_unpluggable([{'attach_handle_type': 'PCI'}])
        exc = self.assertRaises(exception.OperationRefused,
                                rpc.refuse_unpluggable,
                                [{'attach_handle_type': 'PCI'},
                                 {'attach_handle_type': 'MDEV'}])
        self.assertIn('A MDEV accelerator cannot be removed from a running '
                      'server: stop the server first.',
                      exc.format_message())
