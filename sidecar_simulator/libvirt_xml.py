"""The libvirt test driver's node XML for a simulated host."""

from xml.etree import ElementTree

from sidecar import model


def _nodedev_name(address):
    return 'pci_' + address.replace(':', '_').replace('.', '_')


def _sub(parent, tag, text=None, **attributes):
    element = ElementTree.SubElement(parent, tag, **attributes)
    element.text = text
    return element


def _address_xml(parent, address):
    domain, bus, slot, function = model.parse_bdf(address)
    _sub(parent, 'address', domain='0x' + domain, bus='0x' + bus,
         slot='0x' + slot, function='0x' + function)


# The test driver needs a CPU, memory and a computer with a hardware UUID.
_NODE = """<node><cpu><mhz>2000</mhz><model>x86_64</model><active>2</active>
<nodes>1</nodes><sockets>1</sockets><cores>2</cores><threads>1</threads>
</cpu><memory>8388608</memory><device><name>computer</name>
<capability type='system'><hardware>
<uuid>2b5e6b3f-5b86-4f0e-9d0c-4d4f3e2f7a10</uuid></hardware></capability>
</device></node>"""


def _function_xml(node, f, groups):
    device = _sub(node, 'device')
    _sub(device, 'name', _nodedev_name(f.address))
    _sub(device, 'parent',
         _nodedev_name(f.physfn) if f.physfn else 'computer')
    if f.driver:
        # libvirt's formatnode: <driver><name> of the bound driver.
        _sub(_sub(device, 'driver'), 'name', f.driver)
    cap = _sub(device, 'capability', type='pci')
    _sub(cap, 'class', '0x' + f.class_id)
    for tag, value in zip(('domain', 'bus', 'slot', 'function'),
                          model.parse_bdf(f.address)):
        _sub(cap, tag, str(int(value, 16)))
    _sub(cap, 'product', id='0x' + f.product_id)
    _sub(cap, 'vendor', id='0x' + f.vendor_id)
    if f.physfn:
        _address_xml(_sub(cap, 'capability', type='phys_function'),
                     f.physfn)
    if f.virtfns:
        sub = _sub(cap, 'capability', type='virt_functions')
        for index in sorted(f.virtfns):
            _address_xml(sub, f.virtfns[index])
    if f.mdev_types:
        sub = _sub(cap, 'capability', type='mdev_types')
        for t in f.mdev_types:
            element = _sub(sub, 'type', id=t.type_id)
            if t.name is not None:
                _sub(element, 'name', t.name)
            _sub(element, 'deviceAPI', t.device_api)
            _sub(element, 'availableInstances',
                 str(t.available_instances))
    if f.iommu_group is not None:
        # libvirt's formatnode: <iommuGroup number=N> with the address of
        # every member of the group.
        group = _sub(cap, 'iommuGroup', number=str(f.iommu_group))
        for address in groups[f.iommu_group]:
            _address_xml(group, address)
    if f.numa_node is not None:
        _sub(cap, 'numa', node=str(f.numa_node))


def node_xml(functions):
    """libvirt test driver XML (``test:///<file>``) for ``functions``."""
    node = ElementTree.fromstring(_NODE)
    functions = list(functions)
    groups = {}
    for f in functions:
        if f.iommu_group is not None:
            groups.setdefault(f.iommu_group, []).append(f.address)
    for f in functions:
        _function_xml(node, f, groups)
    for f in functions:
        for t in f.mdev_types:
            for uuid in t.mdevs:
                device = _sub(node, 'device')
                _sub(device, 'name', 'mdev_%s_%s' % (
                    uuid.replace('-', '_'), _nodedev_name(f.address)[4:]))
                _sub(device, 'parent', _nodedev_name(f.address))
                cap = _sub(device, 'capability', type='mdev')
                _sub(cap, 'type', id=t.type_id)
                _sub(cap, 'uuid', uuid)
                _sub(cap, 'iommuGroup', number='0')
    return ElementTree.tostring(node, encoding='unicode')
