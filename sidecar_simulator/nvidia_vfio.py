"""What NVIDIA's vGPU 17 host driver (vendor-specific VFIO) lists in a
VF's ``nvidia/creatable_vgpu_types``, for :mod:`sidecar_simulator.nvidia`.

Each reaction names its source:

* A free VF lists the types the card can still create: every vGPU of a
  GPU has the same type (NVIDIA Virtual GPU Software User Guide, "Valid
  Virtual GPU Configurations on a Single GPU": equal-size mode, the
  default), and no more vGPUs than the type's "Maximum vGPUs per GPU"
  ("Virtual GPU Types for Supported GPUs"). So once the card holds one
  vGPU only its type is listed, and a full card lists none: the file is
  its ``ID : vGPU Name`` header alone (the guide's "Creating an NVIDIA
  vGPU on a Linux with KVM Hypervisor that Uses a Vendor-Specific VFIO
  Framework": a type is created only if ``creatable_vgpu_types`` lists
  it).
* A configured VF lists its own type while the card can still create
  vGPUs, and nothing once the card is full: "On a configured VF this
  catalog is frequently empty or reduced to the active type only ... When
  every function of a card is simultaneously configured and its catalog
  is reduced to the header" (NVIDIA kubevirt-gpu-device-plugin
  ``pkg/device_plugin/vfio_vgpu.go``).

A host reboot (every VF reading type 0) is
:func:`sidecar_simulator.kernel.reboot`'s.
"""


def is_full(card):
    """Whether ``card`` holds as many vGPUs as its type allows."""
    used = [c for c in card.current.values() if c != '0']
    if not used:
        return False
    spec = next((t for t in card.gpu.vfio_types if t.type_id == used[0]),
                None)
    return spec is not None and len(used) >= spec.per_gpu


def creatable(card, vf):
    """The ``(id, name)`` types VF ``vf`` of ``card`` lists now."""
    types = card.gpu.vfio_types
    if is_full(card):
        return []
    if card.current[vf] != '0':
        return [(t.type_id, t.name) for t in types
                if t.type_id == card.current[vf]]
    used = [c for c in card.current.values() if c != '0']
    return [(t.type_id, t.name) for t in types
            if (not used or t.type_id == used[0]) and len(used) < t.per_gpu]
