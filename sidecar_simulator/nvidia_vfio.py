"""What NVIDIA's vGPU 17 host driver (vendor-specific VFIO) lists in a
VF's ``nvidia/creatable_vgpu_types``, and what a host reboot leaves of the
types set, for :mod:`sidecar_simulator.nvidia`.

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
* ``current_vgpu_type`` does not survive a host reboot or a reload of
  ``nvidia``: it reads ``0`` on every VF afterwards, which is why NVIDIA
  vgpu-device-manager applies its configuration at every boot
  (``pkg/vgpu/vfio/sysfs.go``; the guide: vGPUs created through sysfs do
  not persist across a reboot).
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


def reboot(nvidia_host):
    """A host reboot as NVIDIA's driver shows it afterwards: every VF's
    type reads 0 (the VFs themselves are back, ``sriov-manage -e`` having
    run at boot)."""
    for card in nvidia_host.cards:
        if card.shape == 'vfio-vgpu':
            card.current = {vf: '0' for vf in card.vfs}
    if nvidia_host.root is not None:
        nvidia_host.write(nvidia_host.root)
