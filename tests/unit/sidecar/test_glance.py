"""The Glance client, against answers recorded by requests-mock."""

import hashlib
import os

import fixtures
from keystoneauth1 import loading as ks_loading
from oslo_config import fixture as cfg_fixture
import requests
from requests_mock.contrib import fixture as rm_fixture
import testtools
import urllib3

from sidecar import exception
from sidecar.program import glance
from tests.unit.sidecar import utils

ENDPOINT = 'http://glance.test'
IMAGE = '8a5c2d4e-3b1f-4f7e-9a0d-1c2b3a4d5e6f'
META_URL = ENDPOINT + '/v2/images/' + IMAGE
FILE_URL = META_URL + '/file'
DATA = b'\x00\x01bitstream' * 1000
MIB = 1024 * 1024


def _meta(data=DATA, **kw):
    meta = {'id': IMAGE, 'status': 'active', 'size': len(data),
            'checksum': hashlib.md5(data).hexdigest(),
            'os_hash_algo': 'sha512',
            'os_hash_value': hashlib.sha512(data).hexdigest(),
            'accel:function_id': 'AAAA1111'}
    meta.update(kw)
    return {k: v for k, v in meta.items() if v is not None}


class Interrupted:
    """A response body that breaks after a first chunk."""

    closed = False

    def __init__(self):
        self.sent = False

    def read(self, *args, **kwargs):
        if self.sent:
            raise urllib3.exceptions.ProtocolError('Connection broken')
        self.sent = True
        return b'part'

    def close(self):
        pass


class ImageClientTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        conf = utils.make_conf()
        self.conf = self.useFixture(cfg_fixture.Config(conf))
        self.conf.config(endpoint_override=ENDPOINT, group='glance')
        self.conf.config(max_bitstream_size=1, group='fpga')
        self.requests = self.useFixture(rm_fixture.Fixture())
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.dest = os.path.join(self.tmp, 'image.bit')
        self.client = glance.ImageClient(conf)

    def _serve(self, meta=None, data=DATA, **file_kw):
        self.requests.get(META_URL, json=_meta() if meta is None else meta)
        if not {'status_code', 'exc', 'body'} & set(file_kw):
            file_kw.setdefault('content', data)
        return self.requests.get(FILE_URL, **file_kw)

    def assertFails(self, words, func=None, *args):
        if func is None:
            func, args = self.client.download, (IMAGE, self.dest)
        exc = self.assertRaises(exception.BitstreamError, func, *args)
        self.assertIn(words, str(exc))
        self.assertEqual([], os.listdir(self.tmp), 'files left behind')
        return exc

    # metadata -------------------------------------------------------------

    def test_get_metadata(self):
        self.requests.get(META_URL, json=_meta())
        self.assertEqual(_meta(), self.client.get_metadata(IMAGE))
        self.assertEqual(META_URL, self.requests.last_request.url)

    def test_not_uuid(self):
        for image_id in ('../../v2/images', 'abc', '', None):
            exc = self.assertRaises(exception.InvalidArgument,
                                    self.client.get_metadata, image_id)
            self.assertIn('is not a UUID', str(exc))
            self.assertRaises(exception.InvalidArgument,
                              self.client.download, image_id, self.dest)
        self.assertFalse(self.requests.called)

    def test_not_found(self):
        self.requests.get(META_URL, status_code=404)
        exc = self.assertFails('no such image in Glance',
                               self.client.get_metadata, IMAGE)
        self.assertEqual('Bitstream %s cannot be used: no such image in '
                         'Glance' % IMAGE, str(exc))

    def test_server_error(self):
        self.requests.get(META_URL, status_code=503)
        self.assertFails('Glance answered HTTP 503',
                         self.client.get_metadata, IMAGE)

    def test_unreachable(self):
        self.requests.get(META_URL, exc=requests.exceptions.ConnectionError(
            'connection refused'))
        self.assertFails('Glance is unreachable', self.client.get_metadata,
                         IMAGE)

    def test_not_json(self):
        self.requests.get(META_URL, text='<html>')
        self.assertFails('not JSON', self.client.get_metadata, IMAGE)

    def test_token_auth(self):
        ks_loading.register_auth_conf_options(self.conf.conf, 'glance')
        self.conf.conf.register_opts(
            ks_loading.get_auth_plugin_conf_options('admin_token'),
            group='glance')
        self.conf.config(auth_type='admin_token', token='secret',
                         endpoint=ENDPOINT, group='glance')
        self.requests.get(META_URL, json=_meta())
        glance.ImageClient(self.conf.conf).get_metadata(IMAGE)
        self.assertEqual('secret',
                         self.requests.last_request.headers['X-Auth-Token'])

    def test_function_id(self):
        self.assertEqual('AAAA1111', glance.ImageClient.function_id(_meta()))
        self.assertEqual('AAAA1111', self.client.function_id(_meta()))
        self.assertIsNone(self.client.function_id({'id': IMAGE}))
        self.assertIsNone(self.client.function_id(None))

    def test_find_by_function(self):
        # As cyborg-conductor looks a profile's accel:function_id up.
        url = ENDPOINT + '/v2/images'
        self.requests.get(url, json={'images': [_meta()]})
        self.assertEqual(_meta(), self.client.find_by_function('AAAA1111'))
        self.assertEqual({'accel:function_id': ['aaaa1111']},
                         self.requests.last_request.qs)
        for images in ([], [_meta(), _meta(id='other')],
                       [_meta(**{'accel:function_id': 'BBBB'})]):
            self.requests.get(url, json={'images': images})
            self.assertFails('images have accel:function_id AAAA1111',
                             self.client.find_by_function, 'AAAA1111')
        self.requests.get(url, json={'images': 'no'})
        self.assertFails('no image list', self.client.find_by_function,
                         'AAAA1111')

    # download -------------------------------------------------------------

    def test_download(self):
        self._serve()
        self.assertEqual(_meta(), self.client.download(IMAGE, self.dest))
        with open(self.dest, 'rb') as f:
            self.assertEqual(DATA, f.read())
        self.assertEqual(['image.bit'], os.listdir(self.tmp))

    def test_download_with_metadata_read_before(self):
        self._serve()
        self.assertEqual(_meta(), self.client.download(IMAGE, self.dest,
                                                       _meta()))
        self.assertEqual([FILE_URL], [r.url for r in
                                      self.requests.request_history])
        with open(self.dest, 'rb') as f:
            self.assertEqual(DATA, f.read())

    def test_download_md5_only(self):
        self._serve(_meta(os_hash_algo=None, os_hash_value=None))
        self.client.download(IMAGE, self.dest)
        with open(self.dest, 'rb') as f:
            self.assertEqual(DATA, f.read())

    def test_download_without_checksum(self):
        self._serve(_meta(os_hash_algo=None, os_hash_value=None,
                          checksum=None))
        self.client.download(IMAGE, self.dest)
        self.assertTrue(os.path.exists(self.dest))

    def test_hash_mismatch(self):
        self._serve(data=DATA[:-1] + b'X')
        exc = self.assertFails('checksum mismatch: sha512 is ')
        self.assertIn('Glance recorded %s' % hashlib.sha512(DATA).hexdigest(),
                      str(exc))

    def test_md5_mismatch(self):
        self._serve(_meta(os_hash_algo=None, os_hash_value=None),
                    data=DATA[:-1] + b'X')
        self.assertFails('checksum mismatch: md5 is ')

    def test_os_hash_preferred_over_md5(self):
        self._serve(_meta(checksum='0' * 32))
        self.client.download(IMAGE, self.dest)
        self.assertTrue(os.path.exists(self.dest))

    def test_unknown_hash_algorithm(self):
        self._serve(_meta(os_hash_algo='nosuchhash'))
        self.assertFails('hash algorithm nosuchhash is not available')
        self.assertEqual(1, self.requests.call_count)

    def test_truncated(self):
        self._serve(data=DATA[:100])
        self.assertFails('received 100 bytes, Glance announced %d'
                         % len(DATA))

    def test_too_big_by_metadata(self):
        self._serve(_meta(size=MIB + 1))
        exc = self.assertFails('it is %d bytes, more than [fpga] '
                               'max_bitstream_size (1 MiB)' % (MIB + 1))
        self.assertIn(IMAGE, str(exc))
        self.assertEqual(1, self.requests.call_count)  # no data fetched

    def test_too_big_while_streaming(self):
        big = b'x' * (MIB + 1)
        self._serve(_meta(size=None, os_hash_algo=None, os_hash_value=None,
                          checksum=None), data=big)
        self.assertFails('larger than [fpga] max_bitstream_size (1 MiB)')

    def test_exactly_the_limit(self):
        data = b'x' * MIB
        self._serve(_meta(data=data), data=data)
        self.client.download(IMAGE, self.dest)
        self.assertEqual(MIB, os.path.getsize(self.dest))

    def test_not_active(self):
        self._serve(_meta(status='queued'))
        self.assertFails('the image is queued, not active')

    def test_file_not_found(self):
        self._serve(status_code=404)
        self.assertFails('no such image in Glance')

    def test_no_data(self):
        self._serve(status_code=204)
        self.assertFails('the image has no data')

    def test_unreachable_for_data(self):
        self._serve(exc=requests.exceptions.ConnectTimeout('timed out'))
        self.assertFails('Glance is unreachable')

    def test_interrupted(self):
        self._serve(body=Interrupted())
        self.assertFails('download from Glance interrupted')

    def test_cannot_write(self):
        self._serve()
        dest = os.path.join(self.tmp, 'missing-dir', 'image.bit')
        exc = self.assertRaises(exception.BitstreamError,
                                self.client.download, IMAGE, dest)
        self.assertIn('cannot write %s.part: No such file or directory'
                      % dest, str(exc))

    def test_failure_leaves_existing_dest_alone(self):
        with open(self.dest, 'w') as f:
            f.write('previous')
        self._serve(data=b'corrupt')
        self.assertRaises(exception.BitstreamError, self.client.download,
                          IMAGE, self.dest)
        self.assertEqual(['image.bit'], os.listdir(self.tmp))
        with open(self.dest) as f:
            self.assertEqual('previous', f.read())
