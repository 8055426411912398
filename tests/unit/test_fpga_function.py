from unittest import mock

import testtools

from nova_cyborg.model import fpga_function

F = '5c937fbf0d5b4b7a8a1a2b3c4d5e6f70'
TRAIT = 'CUSTOM_FPGA_FUNCTION_ID_INTEL_' + F.upper()


class FpgaFunctionTest(testtools.TestCase):

    @mock.patch('nova.image.glance.API')
    def test_function_of_image(self, api):
        api.return_value.get.return_value = {
            'properties': {'accel:function_id': F}}
        self.assertEqual(F, fpga_function.function_of_image('ctx', 'img'))
        api.return_value.get.assert_called_once_with('ctx', 'img')

    @mock.patch('nova.image.glance.API')
    def test_image_naming_no_function(self, api):
        for image in ({}, {'properties': {}},
                      {'properties': {'accel:function_id': 7}}):
            api.return_value.get.return_value = image
            exc = self.assertRaises(fpga_function.NoFunction,
                                    fpga_function.function_of_image,
                                    'ctx', 'img')
            self.assertIn('bitstream img names no accel:function_id',
                          str(exc))

    def test_required_function_traits(self):
        group = {'resources:FPGA': '1',
                 'trait:' + TRAIT: 'required',
                 'trait:CUSTOM_FPGA_FUNCTION_ID_X': 'forbidden',
                 'trait:CUSTOM_OTHER': 'required'}
        self.assertEqual([TRAIT],
                         fpga_function.required_function_traits(group))

    def test_names(self):
        self.assertTrue(fpga_function.names(TRAIT, F))
        self.assertTrue(fpga_function.names(TRAIT, F.upper()))
        self.assertFalse(fpga_function.names(TRAIT, 'abc'))
        self.assertFalse(fpga_function.names('CUSTOM_X_' + F.upper(), F))
