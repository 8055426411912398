"""OPAE's ``.gbs`` container ("green bitstream"), read as OPAE reads it.

Source: OPAE SDK (github.com/OFS/opae-sdk, formerly OPAE/opae-sdk),
``libraries/libbitstream/bitstream.c`` (``opae_load_bitstream``,
``opae_resolve_bitstream``, ``opae_resolve_legacy_bitstream``,
``opae_bitstream_parse_metadata``), ``libraries/libbitstream/
metadatav1.c`` (``opae_bitstream_parse_metadata_v1``) and
``libraries/libbitstream/bitstream.h`` (``opae_bitstream_header``,
``opae_legacy_bitstream_header``, packed; ``OPAE_LEGACY_BITSTREAM_MAGIC``).

A GBS file is, in host (little-endian) byte order::

    16 bytes  valid_gbs_guid   58656f6e-4650-4741-b747-425376303031
     4 bytes  metadata_length  (uint32)
     N bytes  metadata         JSON, N = metadata_length
     ...      the raw partial bitstream (OPAE's ``rbf_data``)

The JSON has an integer ``version`` (1; 640 and 650 are accepted as 1,
as OPAE does for GBS files of the BBS 6.4.0/6.5.0 era), and an object
``afu-image`` with ``interface-uuid`` (the FPGA interface the bitstream
was built for: the PR region's ``compat_id``) and ``accelerator-clusters``,
an array of objects whose ``accelerator-type-uuid`` is the AFU id the port
reports once loaded (``dfl-port.M/afu_id``). ``clock-frequency-high`` and
``clock-frequency-low`` (optional, MHz, doubles in ``metadatav1.c``) are
the AFU user clocks the image needs: OPAE's ``fpgaconf`` sets them
(``libraries/plugins/xfpga/reconf.c`` ``set_afu_userclock``) when either
is above 0.

The legacy format (before BBS 6.4.0, deprecated by OPAE) is a 4-byte
magic ``0x1d1f8680``, the interface id in reversed byte order, and the
raw bitstream from byte 20; it names no AFU id.

Anything else is refused with :class:`~sidecar.exception.InvalidArgument`
saying why: nothing here trusts a length or a key it has not checked.
"""

import dataclasses
import json
import struct
import uuid

from sidecar import exception

GBS_GUID = uuid.UUID('58656f6e-4650-4741-b747-425376303031')
LEGACY_MAGIC = 0x1d1f8680
_HEADER = struct.Struct('<16sI')   # valid_gbs_guid, metadata_length
_LEGACY = struct.Struct('<I16s')   # legacy_magic, legacy_pr_ifc_id
#: Metadata versions OPAE reads as version 1.
_V1 = (1, 640, 650)


@dataclasses.dataclass(frozen=True)
class Gbs:
    """What a ``.gbs`` file holds; ids are 32 lower-case hex digits, the
    form of sysfs' ``compat_id`` and ``afu_id``."""
    interface_id: str
    afu_ids: tuple          # accelerator-type-uuid of each cluster
    offset: int             # where the raw bitstream starts
    legacy: bool = False
    #: (clock-frequency-high, clock-frequency-low) in MHz, 0 when unset.
    clocks: tuple = (0.0, 0.0)

    @property
    def user_clock(self):
        """Whether the image asks for AFU user clocks (either above 0)."""
        return any(c > 0 for c in self.clocks)


def _invalid(reason):
    return exception.InvalidArgument(name='GBS file', reason=reason)


def hex_id(value, what):
    """``value`` (a UUID string, dashes or not) as 32 lower-case hex."""
    if not isinstance(value, str):
        raise _invalid('%s is not a string' % what)
    try:
        return uuid.UUID(value.strip()).hex
    except ValueError:
        raise _invalid('%s %r is not a UUID' % (what, value[:64]))


def is_gbs(data):
    """Whether ``data`` (the file's first bytes) starts as a GBS file,
    current or legacy."""
    if len(data) >= 16 and data[:16] == GBS_GUID.bytes:
        return True
    return len(data) >= 4 and struct.unpack_from('<I', data)[0] == \
        LEGACY_MAGIC


def parse(data):
    """The :class:`Gbs` in ``data`` (bytes of the whole file)."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise _invalid('not bytes')
    data = bytes(data)
    if len(data) >= 4 and data[:16] != GBS_GUID.bytes and \
            struct.unpack_from('<I', data)[0] == LEGACY_MAGIC:
        return _legacy(data)
    # sizeof(opae_bitstream_header) counts one byte of metadata.
    if len(data) < _HEADER.size + 1:
        raise _invalid('%d bytes: shorter than the GBS header' % len(data))
    guid, length = _HEADER.unpack_from(data)
    if guid != GBS_GUID.bytes:
        raise _invalid('it does not start with the GBS GUID %s (found %s)'
                       % (GBS_GUID, uuid.UUID(bytes=guid)))
    offset = _HEADER.size + length
    if offset > len(data):
        raise _invalid('its metadata length %d runs past the end of the '
                       'file (%d bytes)' % (length, len(data)))
    try:
        metadata = json.loads(data[_HEADER.size:offset].decode('utf-8'))
    except (UnicodeDecodeError, ValueError) as e:
        raise _invalid('its metadata is not JSON: %s' % e)
    interface_id, afu_ids, clocks = _metadata(metadata)
    return Gbs(interface_id=interface_id, afu_ids=afu_ids, offset=offset,
               clocks=clocks)


def _legacy(data):
    if len(data) < _LEGACY.size:
        raise _invalid('%d bytes: shorter than the legacy GBS header'
                       % len(data))
    ifc = _LEGACY.unpack_from(data)[1]
    # opae_resolve_legacy_bitstream: "The guid is encoded backwards."
    return Gbs(interface_id=ifc[::-1].hex(), afu_ids=(),
               offset=_LEGACY.size, legacy=True)


def _metadata(metadata):
    if not isinstance(metadata, dict):
        raise _invalid('its metadata is not a JSON object')
    version = metadata.get('version')
    if isinstance(version, bool) or not isinstance(version, int):
        raise _invalid('its metadata has no integer "version"')
    if version not in _V1:
        raise _invalid('metadata version %d is not supported (only 1)'
                       % version)
    image = metadata.get('afu-image')
    if not isinstance(image, dict):
        raise _invalid('its metadata has no "afu-image" object')
    interface_id = hex_id(image.get('interface-uuid'),
                          'afu-image "interface-uuid"')
    clusters = image.get('accelerator-clusters')
    if not isinstance(clusters, list):
        raise _invalid('afu-image has no "accelerator-clusters" array')
    afu_ids = []
    for index, cluster in enumerate(clusters):
        if not isinstance(cluster, dict):
            raise _invalid('accelerator-clusters[%d] is not an object'
                           % index)
        afu_ids.append(hex_id(cluster.get('accelerator-type-uuid'),
                              'accelerator-clusters[%d] '
                              '"accelerator-type-uuid"' % index))
    return interface_id, tuple(afu_ids), (_clock(image, 'high'),
                                          _clock(image, 'low'))


def _clock(image, which):
    key = 'clock-frequency-' + which
    value = image.get(key, 0)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or \
            value < 0:
        raise _invalid('afu-image "%s" is %r, not a frequency in MHz'
                       % (key, value))
    return float(value)


def build(interface_id, afu_ids, bitstream, extra=None, clocks=(0, 0)):
    """A GBS file (bytes) for tests and the simulator: ``bitstream``
    behind version 1 metadata naming ``interface_id``, ``afu_ids`` and
    the user ``clocks`` (high, low MHz)."""
    metadata = {
        'version': 1, 'platform-name': 'simulated',
        'afu-image': {
            'interface-uuid': str(uuid.UUID(interface_id)),
            'magic-no': 488605312, 'power': 0,
            'clock-frequency-high': clocks[0],
            'clock-frequency-low': clocks[1],
            'accelerator-clusters': [
                {'name': 'afu%d' % i, 'total-contexts': 1,
                 'accelerator-type-uuid': str(uuid.UUID(a))}
                for i, a in enumerate(afu_ids)]}}
    metadata.update(extra or {})
    text = json.dumps(metadata).encode()
    return _HEADER.pack(GBS_GUID.bytes, len(text)) + text + bitstream
