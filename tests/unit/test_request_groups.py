"""Device profile groups -> Placement request groups."""

import ddt

from nova import test

from nova_cyborg import exception
from nova_cyborg.model import request_groups


@ddt.ddt
class BuildRequestGroupsTest(test.NoDBTestCase):

    def test_groups_resources_and_traits(self):
        groups = request_groups.build_request_groups([
            {'resources:FPGA': '2', 'trait:CUSTOM_FPGA_INTEL': 'required',
             'trait:CUSTOM_FPGA_OLD': 'forbidden',
             'accel:bitstream_id': 'b1'},
            {'resources:CUSTOM_ACCELERATOR_QAT': '1'},
        ])
        self.assertEqual(['device_profile_0', 'device_profile_1'],
                         [g.requester_id for g in groups])
        self.assertEqual({'FPGA': 2}, groups[0].resources)
        self.assertEqual({'CUSTOM_FPGA_INTEL'}, groups[0].required_traits)
        self.assertEqual({'CUSTOM_FPGA_OLD'}, groups[0].forbidden_traits)
        self.assertTrue(groups[0].use_same_provider)
        self.assertEqual({'CUSTOM_ACCELERATOR_QAT': 1}, groups[1].resources)
        self.assertEqual(set(), groups[1].required_traits)
        # What each group asks of an FPGA, kept in this process only.
        self.assertEqual([('bitstream', 'b1'), None], groups.asks)
        self.assertNotIn('asks', str(groups[0].obj_to_primitive()))

    def test_standard_trait_and_port_owner(self):
        groups = request_groups.build_request_groups(
            [{'resources:VGPU': 1, 'trait:HW_GPU_API_VULKAN': 'required'}],
            owner='port-uuid')
        self.assertEqual('device_profile_0port-uuid', groups[0].requester_id)
        self.assertEqual({'VGPU': 1}, groups[0].resources)
        self.assertEqual({'HW_GPU_API_VULKAN'}, groups[0].required_traits)

    @ddt.data(
        ([], 'at least one group'),
        (None, 'at least one group'),
        ([{}], 'at least one resource'),
        ([{'trait:CUSTOM_X': 'forbidden'}], 'at least one resource'),
        (['resources:FPGA'], 'must be an object'),
        ([{'resources:FPGA': '0'}], 'positive integer'),
        ([{'resources:FPGA': '-1'}], 'positive integer'),
        ([{'resources:FPGA': 'two'}], 'positive integer'),
        ([{'resources:FPGA': '1.5'}], 'positive integer'),
        ([{'resources:FPGA': True}], 'positive integer'),
        ([{'resources:FPGA': '１'}], 'positive integer'),
        ([{'resources:NOT_A_CLASS': '1'}], 'unknown resource class'),
        ([{'resources:custom_lower': '1'}], 'unknown resource class'),
        ([{'resources:FPGA': '1', 'trait:NOT_A_TRAIT': 'required'}],
         'invalid trait name'),
        ([{'resources:FPGA': '1', 'trait:CUSTOM_bad-name': 'required'}],
         'invalid trait name'),
        ([{'resources:FPGA': '1', 'trait:CUSTOM_X': 'preferred'}],
         'must be "required" or "forbidden"'),
        ([{'resources:FPGA': '1', 'resources1:FPGA': '1'}], 'unknown key'),
        ([{'resources:FPGA': '1', 'color': 'blue'}], 'unknown key'),
        ([{'resources:FPGA': '1', 'accel:<script>': 'x'}], 'unknown key'),
        ([{'resources:FPGA': '1'}, {'resources:FPGA': 'x'}], 'group 1'),
    )
    @ddt.unpack
    def test_invalid(self, groups, message):
        exc = self.assertRaises(exception.DeviceProfileError,
                                request_groups.build_request_groups,
                                groups, dp_name='dp1')
        self.assertIn(message, exc.format_message())
        self.assertIn('dp1', exc.format_message())

    def test_too_many_accelerators(self):
        self.flags(max_accelerators_per_instance=3, group='nova_cyborg')
        request_groups.build_request_groups(
            [{'resources:FPGA': '2'}, {'resources:FPGA': '1'}])
        exc = self.assertRaises(
            exception.DeviceProfileError,
            request_groups.build_request_groups,
            [{'resources:FPGA': '2'}, {'resources:FPGA': '2'}])
        self.assertIn('asks for 4 accelerators; at most 3',
                      exc.format_message())

    def test_limit_counts_what_the_server_has(self):
        self.flags(max_accelerators_per_instance=3, group='nova_cyborg')
        groups = request_groups.build_request_groups(
            [{'resources:FPGA': '2'}])
        self.assertEqual(2, request_groups.count(groups))
        request_groups.check_limit('dp1', 2, others=1)
        exc = self.assertRaises(exception.DeviceProfileError,
                                request_groups.check_limit, 'dp1', 2,
                                others=2)
        self.assertIn('asks for 2 accelerators and the server has 2 '
                      'already; at most 3', exc.format_message())

    def test_error_is_nova_device_profile_error(self):
        # Nova's API maps nova.exception.DeviceProfileError to HTTP 400.
        from nova import exception as nova_exception
        self.assertTrue(issubclass(exception.DeviceProfileError,
                                   nova_exception.DeviceProfileError))

    def test_requester_id(self):
        self.assertEqual('device_profile_3',
                         request_groups.requester_id(3))
        self.assertEqual('device_profile_0abc',
                         request_groups.requester_id(0, 'abc'))
