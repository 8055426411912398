"""Names of a vGPU 17 card's types (vendor-specific VFIO) that outlive
what the card lists now.

``nvidia/creatable_vgpu_types`` lists what a VF can be given *now*. On a
full card the lists of the free VFs are reduced to their header, and a
configured VF's list is "frequently empty or reduced to the active type
only" (NVIDIA kubevirt-gpu-device-plugin
``pkg/device_plugin/vfio_vgpu.go``, which falls back to NVML then). So
each id -> name the lists of a card ever showed is kept under ``[sidecar]
state_path`` (:data:`NAMES_FILE`), per card and product, since ids are
unique only within a card: a typed VF keeps its name, its trait and its
handle in Cyborg whatever the lists say now, across restarts. A typed VF
whose type no list ever named (the sidecar first started on a full card)
is still reported, as :func:`placeholder_name`, with a warning: a VF in
use is never dropped from the report, since cyborg-conductor would then
destroy the handle of the server using it.
"""

from sidecar.drivers import gpu_vfio
from sidecar.state import cache as state_cache

#: Under ``[sidecar] state_path``: ``{PF address: {"product": id,
#: "types": {type id: name}}}`` of every vGPU 17 type name seen.
NAMES_FILE = 'vgpu_type_names.json'


def placeholder_name(type_id):
    """The name of a typed VF whose type no list ever named: its trait
    is ``CUSTOM_<VENDOR>_<PRODUCT>_TYPE_<id>``."""
    return 'NVIDIA type-%s' % type_id


class KnownNames:
    """The type names of each card, kept across full cards and restarts
    under ``state_path``; read at the first vGPU 17 card (a host without
    one never writes the file)."""

    def __init__(self, state_path, problems):
        self._state_path = state_path
        self._problems = problems
        self._file = None
        self._data = None

    def _load(self):
        self._data = {}
        try:
            self._file, data = state_cache.open_in(self._state_path,
                                                   NAMES_FILE)
        except OSError as exc:
            self._problems.warning(
                'Cannot keep vGPU type names under %s (%s): a typed VF of '
                'a full card may be reported by its type id only',
                self._state_path, exc)
        else:
            self._data = data if isinstance(data, dict) else {}

    def merge(self, pf, product, seen):
        """``{type id: name}`` of card ``pf`` of product ``product``: what
        its lists say now (``seen``) over what they said before, saved
        when it changed. A card of another product at ``pf`` (replaced)
        starts afresh."""
        if self._data is None:
            self._load()
        entry = self._data.get(pf)
        known = {}
        if (isinstance(entry, dict) and entry.get('product') == product and
                isinstance(entry.get('types'), dict)):
            known = {str(k): v for k, v in entry['types'].items()
                     if str(k).isdigit() and isinstance(v, str) and
                     gpu_vfio.TYPE_NAME.fullmatch(v)}
        merged = dict(known, **seen)
        if merged != known or entry is None and merged:
            self._data[pf] = {'product': product, 'types': merged}
            if self._file is not None:
                try:
                    self._file.save(self._data)
                except OSError as exc:
                    self._problems.warning(
                        'Cannot save %s (%s): a typed VF of a full card '
                        'may be reported by its type id only after a '
                        'restart', self._file.path, exc)
        return merged
