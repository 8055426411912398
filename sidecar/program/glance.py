"""Fetching bitstreams from Glance.

A bitstream is a Glance image. Its ``accel:function_id`` property names the
function it implements; its data is downloaded, bounded by ``[fpga]
max_bitstream_size`` and checked against the hash Glance recorded.
"""

import hashlib
import os

from keystoneauth1 import exceptions as ksa_exc
from oslo_log import log as logging
from oslo_utils import uuidutils
import requests

from sidecar import conf as sidecar_conf
from sidecar import exception

LOG = logging.getLogger(__name__)

GROUP = 'glance'
FUNCTION_ID_PROPERTY = 'accel:function_id'
CHUNK_SIZE = 1024 * 1024
MIB = 1024 * 1024


_adapter = sidecar_conf.adapter


class ImageClient:
    """Read image metadata and data from the Image service (v2 API)."""

    def __init__(self, conf):
        self.conf = conf
        self.adapter = _adapter(conf, GROUP)

    def _error(self, image_id, reason):
        return exception.BitstreamError(image_id=image_id, reason=reason)

    def _get(self, image_id, url, **kwargs):
        try:
            resp = self.adapter.get(url, **kwargs)
        except ksa_exc.ClientException as e:
            raise self._error(image_id, 'Glance is unreachable: %s' % e)
        if resp.status_code == 404:
            resp.close()
            raise self._error(image_id, 'no such image in Glance')
        if resp.status_code >= 400:
            resp.close()
            raise self._error(image_id, 'Glance answered HTTP %d to GET %s'
                              % (resp.status_code, url))
        return resp

    def get_metadata(self, image_id):
        """The image's metadata (``GET /v2/images/{id}``) as a dict."""
        if not uuidutils.is_uuid_like(image_id):
            raise exception.InvalidArgument(
                name='image id', reason='%r is not a UUID' % (image_id,))
        resp = self._get(image_id, '/v2/images/%s' % image_id)
        try:
            return resp.json()
        except ValueError:
            raise self._error(image_id, 'Glance sent metadata that is not '
                              'JSON')

    def find_by_function(self, function_id):
        """The metadata of the one image whose ``accel:function_id`` is
        ``function_id`` (``GET /v2/images?accel:function_id=...``), as
        cyborg-conductor looks a device profile's function up at bind
        (``FPGAExtARQ._get_bitstream_md_from_function_id``): none or
        several is a BitstreamError."""
        resp = self._get(function_id, '/v2/images',
                         params={FUNCTION_ID_PROPERTY: function_id})
        try:
            images = resp.json()['images']
        except (ValueError, KeyError, TypeError):
            images = None
        if not isinstance(images, list):
            raise self._error(function_id, 'Glance sent no image list')
        images = [i for i in images if isinstance(i, dict) and
                  i.get(FUNCTION_ID_PROPERTY) == function_id]
        if len(images) != 1:
            raise self._error(function_id, '%d images have accel:function_id '
                              '%s; one is needed to load it' % (
                                  len(images), function_id))
        return images[0]

    def download(self, image_id, dest_path, metadata=None):
        """Download the image's data to ``dest_path``; return its metadata.

        ``metadata`` is the image's metadata if the caller read it already
        (:meth:`get_metadata`); it is read otherwise.

        The data goes to ``<dest_path>.part`` and is renamed to
        ``dest_path`` once complete and checked. On any failure the partial
        file is removed, ``dest_path`` is left as it was and BitstreamError
        says why.
        """
        meta = metadata or self.get_metadata(image_id)
        if meta.get('status') != 'active':
            raise self._error(image_id, 'the image is %s, not active'
                              % meta.get('status'))
        limit = self.conf.fpga.max_bitstream_size * MIB
        size = meta.get('size')
        if size is not None and size > limit:
            raise self._error(image_id, self._too_big(size))
        hasher, expected = self._hasher(image_id, meta)
        part = dest_path + '.part'
        try:
            written = self._fetch(image_id, part, limit, hasher)
            if size is not None and written != size:
                raise self._error(image_id, 'received %d bytes, Glance '
                                  'announced %d' % (written, size))
            if hasher is not None and hasher.hexdigest() != expected:
                raise self._error(image_id, 'checksum mismatch: %s is %s, '
                                  'Glance recorded %s'
                                  % (hasher.name, hasher.hexdigest(),
                                     expected))
            os.replace(part, dest_path)
        except BaseException:
            try:
                os.unlink(part)
            except OSError:
                pass
            raise
        LOG.info('Downloaded image %(id)s to %(dest)s (%(size)d bytes)',
                 {'id': image_id, 'dest': dest_path, 'size': written})
        return meta

    def _too_big(self, size=None):
        return ('it is %s than [fpga] max_bitstream_size (%d MiB)'
                % ('%d bytes, more' % size if size else 'larger',
                   self.conf.fpga.max_bitstream_size))

    def _hasher(self, image_id, meta):
        algo = meta.get('os_hash_algo')
        value = meta.get('os_hash_value')
        if algo and value:
            try:
                return hashlib.new(algo), value.lower()
            except ValueError:
                raise self._error(image_id, 'Glance hash algorithm %s is '
                                  'not available here' % algo)
        if meta.get('checksum'):
            return (hashlib.md5(usedforsecurity=False),
                    meta['checksum'].lower())
        LOG.warning('Image %s has no checksum; its data cannot be verified',
                    image_id)
        return None, None

    def _fetch(self, image_id, path, limit, hasher):
        resp = self._get(image_id, '/v2/images/%s/file' % image_id,
                         stream=True)
        written = 0
        try:
            if resp.status_code == 204:
                raise self._error(image_id, 'the image has no data')
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC |
                         os.O_NOFOLLOW | os.O_CLOEXEC, 0o640)
            with os.fdopen(fd, 'wb') as out:
                for chunk in resp.iter_content(chunk_size=CHUNK_SIZE):
                    written += len(chunk)
                    if written > limit:
                        raise self._error(image_id, self._too_big())
                    if hasher is not None:
                        hasher.update(chunk)
                    out.write(chunk)
        except requests.RequestException as e:
            raise self._error(image_id, 'download from Glance interrupted: '
                              '%s' % e)
        except OSError as e:
            raise self._error(image_id, 'cannot write %s: %s'
                              % (path, e.strerror or e))
        finally:
            resp.close()
        return written

    @staticmethod
    def function_id(metadata):
        """The image's ``accel:function_id`` property, or None."""
        return (metadata or {}).get(FUNCTION_ID_PROPERTY)
