"""NVIDIA vGPU 17 and later (vendor-specific VFIO): type names per card,
and whether a reported VF still holds its vGPU.

A vGPU is a VF bound to ``nvidia`` whose ``nvidia/current_vgpu_type`` is
not 0 (NVIDIA vgpu-device-manager ``pkg/vgpu/vfio/sysfs.go``); the gpu
driver reports it with a PCI attach handle that Nova passes through with
``managed='no'``.

The idle VFs (type 0) of a card whose product ``[gpu] vfio_vgpu_types``
names are offered through one provider of the card per type, with a
vendor-VFIO MDEV handle per VF (:func:`set_at_bind_handle`;
:mod:`sidecar.drivers.gpu_vfio_card`): cyborg-conductor 17 calls the
sidecar's ``create_vgpu_mdev`` when it binds an MDEV handle, and
:mod:`sidecar.program.vgpu_types` writes the type then, and writes 0 back
at ``remove_vgpu_mdev``. A VF keeps that handle while it holds the type it
got at bind (:data:`SET_AT_BIND_FILE`), so that the handle of its ARQ
stays the same in Cyborg; a VF whose type an operator set has a PCI
handle and is never changed.
"""

import json
import os
import re

from sidecar import exception
from sidecar import model
from sidecar.discovery import health as health_mod
from sidecar.sources import base as sources

NVIDIA_DRIVER = 'nvidia'


def type_catalog(functions, problems):
    """Type id -> name of each card's vendor-VFIO vGPU types.

    ``{pf address: {type id: name}}``, merged from the
    ``creatable_vgpu_types`` of the card's functions: a VF with a type
    lists only its own, a free VF the types still creatable, so a type is
    named as long as one function of the card lists it. Ids are unique
    only within a card (NVIDIA kubevirt-gpu-device-plugin
    ``vfio_vgpu.go``), so cards are never mixed.
    """
    catalog = {}
    for function in functions:
        if function.vendor_vgpu is None:
            continue
        names = catalog.setdefault(function.physfn or function.address, {})
        for type_id, name in function.vendor_vgpu.creatable:
            known = names.setdefault(type_id, name)
            if known != name:
                problems.warning(
                    'GPU %s names vGPU type %s both %r and %r: keeping %r',
                    function.physfn or function.address, type_id, known,
                    name, known)
    return catalog


def problems(sysfs_root, device, set_at_bind=None):
    """Why the vGPU 17 VFs of ``device`` (its handles with
    ``managed='no'``) no longer hold their vGPU: a VF left ``nvidia``
    (libvirt or an operator rebound it) or its type was removed, a VF
    given its type at bind (``set_at_bind``, :func:`read_set_at_bind`)
    included: it reads 0 after a host reboot until the sidecar writes the
    type back (:mod:`sidecar.program.vgpu_restore`), and is not idle
    meanwhile."""
    set_at_bind = set_at_bind or {}
    found = []
    for dep in device.deployables:
        for handle in dep.attach_handles:
            if handle.managed != 'no':
                continue
            path = health_mod.device_dir(sysfs_root, handle.address)
            if not os.path.isdir(path):
                continue  # the PCI checks say it is gone
            try:
                driver = os.path.basename(os.readlink(os.path.join(
                    path, 'driver')))
            except OSError:
                driver = None
            if driver != NVIDIA_DRIVER:
                found.append('vGPU %s is no longer bound to nvidia (%s)'
                             % (handle.address, driver or 'no driver'))
                continue
            current = sources.read_file(os.path.join(
                path, 'nvidia', 'current_vgpu_type'))
            if (handle.vendor_vfio and current == '0' and
                    handle.address not in set_at_bind):
                continue  # idle, offered: its type is set at bind
            if current in (None, '', '0'):
                found.append('vGPU %s lost its vGPU type '
                             '(nvidia/current_vgpu_type is %s)%s'
                             % (handle.address, 'absent' if current is None
                                else '0', '; given %s at bind, it is '
                                'written back' % set_at_bind[handle.address][1]
                                if handle.address in set_at_bind else ''))
    return tuple(found)


OFFER_OPTION = '[gpu] vfio_vgpu_types'
#: Under ``[sidecar] state_path``: ``{VF address: {"type": id, "name":
#: name}}`` of the types the sidecar set at bind and has not removed
#: (written by sidecar.program.vgpu_types, read at each discovery).
SET_AT_BIND_FILE = 'vgpu_types_set.json'
_PRODUCT = re.compile(r'^(?:0x)?[0-9a-fA-F]{1,4}$')
#: A vGPU type name as sidecar.sources.base accepts it from sysfs.
TYPE_NAME = re.compile(r'^[A-Za-z0-9][A-Za-z0-9 ._()+/-]{0,63}$')


def parse_offers(items):
    """``{product id: [type name, ...]}`` of ``[gpu] vfio_vgpu_types``
    (``<product_id>:<type name>`` items), names in option order."""
    offers = {}
    for item in items:
        product, sep, name = item.partition(':')
        product, name = product.strip(), name.strip()
        if (not sep or not _PRODUCT.match(product) or
                not TYPE_NAME.match(name)):
            raise exception.InvalidArgument(
                name=OFFER_OPTION,
                reason='%r is not <product_id>:<vGPU type name>, for '
                       'example 2331:NVIDIA H100-4C' % (item,))
        key = '%04x' % int(product.lower().replace('0x', ''), 16)
        offers.setdefault(key, []).append(name)
    return offers


def read_state(sysfs_root, address):
    """``(driver, current type id, {type id: name})`` of VF ``address``
    read from sysfs now (``current`` None when it has no
    ``nvidia/current_vgpu_type``); DeviceBusy when they are malformed."""
    path = health_mod.device_dir(sysfs_root, address)
    try:
        driver = os.path.basename(os.readlink(os.path.join(path, 'driver')))
    except OSError:
        driver = None
    current = sources.read_file(os.path.join(path, 'nvidia',
                                             'current_vgpu_type'))
    try:
        state = sources.make_vendor_vgpu(
            current, sources.read_file(os.path.join(
                path, 'nvidia', 'creatable_vgpu_types')))
    except ValueError as exc:  # MalformedDevice too
        raise exception.DeviceBusy(
            address=address, reason='its nvidia/ files cannot be trusted: '
                                    '%s' % exc)
    return driver, state.current, dict(state.creatable)


def set_at_bind_handle(address, name):
    """The attach handle of VF ``address`` offered for, or given at bind,
    vGPU type ``name``: an MDEV handle (cyborg-conductor calls the
    sidecar at its bind and unbind) whose attach_info says it is the VF,
    passed through with ``managed='no'`` (:attr:`model.AttachHandle.
    vendor_vfio`)."""
    return model.AttachHandle('MDEV', address, mdev_type=name, managed='no')


def read_set_at_bind(state_path, problems=None):
    """``{VF address: (type id, name)}`` of :data:`SET_AT_BIND_FILE` under
    ``state_path``; empty when there is none. Malformed entries are
    skipped (with a warning to ``problems``): such a VF is then handled
    as one an operator typed, whose type is never removed."""
    try:
        with open(os.path.join(state_path, SET_AT_BIND_FILE)) as f:
            data = json.load(f)
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        data = exc
    if not isinstance(data, dict):
        if problems is not None:
            problems.warning('Cannot read %s under %s (%s): the vGPU types '
                             'set at bind are taken as set by an operator',
                             SET_AT_BIND_FILE, state_path, data)
        return {}
    found = {}
    for address, entry in data.items():
        type_id = entry.get('type') if isinstance(entry, dict) else None
        name = entry.get('name') if isinstance(entry, dict) else None
        if (isinstance(type_id, str) and re.fullmatch(r'[1-9][0-9]{0,8}',
                                                      type_id) and
                isinstance(name, str) and TYPE_NAME.fullmatch(name)):
            found[address] = (type_id, name)
        elif problems is not None:
            problems.warning('%s: entry %r is malformed; ignored',
                             SET_AT_BIND_FILE, address)
    return found
