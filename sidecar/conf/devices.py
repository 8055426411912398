"""The sidecar's options of its devices: ``[pci]``, ``[gpu]``, ``[fpga]``
and ``[health]`` (registered by :func:`sidecar.conf.register_opts`)."""

from oslo_config import cfg

PCI_OPTS = [
    cfg.MultiStrOpt('device_spec',
                    default=[],
                    help='A JSON object selecting PCI functions the ``pci`` '
                         'driver reports, in the spirit of Nova\'s '
                         '``[pci] device_spec``. Keys: ``vendor_id``, '
                         '``product_id`` (hex, or ``*``), ``address`` (a '
                         'glob such as ``0000:81:*``), ``resource_class`` '
                         '(default ``PCI``, becomes ``CUSTOM_PCI``), '
                         '``traits`` (a list, normalized to ``CUSTOM_`` '
                         'names unless standard), ``physical_function`` '
                         '(true: report PFs; false (default): report VFs '
                         'of matched PFs, or the function itself when it '
                         'has none), ``live_migratable`` (true, or '
                         '``"yes"`` as in Nova\'s own option: the functions\' '
                         'driver supports VFIO migration; the device\'s '
                         'provider gets the trait ``HW_PCI_LIVE_MIGRATABLE`` '
                         'and a server using it may be live migrated; false '
                         '(default): such a server is refused live '
                         'migration). May be repeated.'),
]

GPU_OPTS = [
    cfg.ListOpt('enabled_mdev_types',
                default=[],
                help='mdev types (for example ``nvidia-35``) the ``gpu`` '
                     'driver offers as VGPU. A GPU with none of these '
                     'types is offered whole, as PGPU.'),
    cfg.ListOpt('live_migratable_mdev_types',
                default=[],
                help='Those of ``enabled_mdev_types`` whose vendor driver '
                     'supports VFIO migration of the mdev\'s device state '
                     '(check the vendor\'s documentation for the driver '
                     'version the host runs). The VGPU provider of a GPU '
                     'offering one of them gets the trait '
                     '``HW_PCI_LIVE_MIGRATABLE``, and a server using it may '
                     'be live migrated to a host offering the same type. '
                     'Empty (the default): servers with vGPUs are refused '
                     'live migration.'),
    cfg.ListOpt('device_selector',
                default=[],
                help='The GPUs the ``gpu`` driver may report: each item is '
                     'either ``<vendor_id>:<product_id>`` (hex, either may '
                     'be ``*``), for example ``10de:1eb8`` or ``10de:*``, '
                     'or a PCI address glob with a dot, for example '
                     '``0000:81:00.0`` or ``0000:3b:*.*``. Empty (the '
                     'default): no GPU is reported. Whatever it selects, '
                     'the host\'s own display (a VGA controller with '
                     '``boot_vga`` 1) and BMC display controllers (ASPEED, '
                     'Matrox) are never reported.'),
    cfg.DictOpt('mdev_max_instances',
                default={},
                help='How many vGPUs of a type one GPU hosts, as '
                     '``<type>:<count>`` items, overriding what NVIDIA\'s '
                     'driver says. For an mdev type of a GPU with SR-IOV '
                     '(vGPU 16 and earlier on A100, A30, A40, A16), for '
                     'example ``nvidia-474:4`` (what Nova\'s '
                     '``[mdev_<type>] max_instances`` says): each VF is the '
                     'mdev parent of at most one vGPU and says 1 available '
                     'while the GPU is not full, and the ``gpu`` driver '
                     'otherwise reads the ``max_instance`` NVIDIA writes in '
                     'the type\'s ``description``. For a vGPU 17 type of '
                     '``vfio_vgpu_types``, by its name, for example '
                     '``NVIDIA H100-20C:4``: otherwise the GPU\'s '
                     'framebuffer over the type\'s (needed for MIG-backed '
                     'types, whose name has no size). The GPU is one VGPU '
                     'provider of this many per type (at most one per VF '
                     'that may host it). Without an entry or a '
                     '``max_instance``, an mdev type is offered as the VFs '
                     'say, summed, with a warning.'),
    cfg.ListOpt('passthrough_drivers',
                default=['vfio-pci'],
                help='The host drivers a GPU offered whole (PGPU) may be '
                     'bound to: ``vfio-pci`` or a vendor\'s VFIO variant '
                     'driver. A GPU bound to any other driver (``nvidia``, '
                     '``nouveau``, ``amdgpu``) is used by the host and is '
                     'not offered; a GPU bound to no driver is. The other '
                     'functions of its IOMMU group must be bridges, or '
                     'functions of the same card bound to one of these or '
                     'to none.'),
    cfg.ListOpt('vfio_vgpu_types',
                default=[],
                help='vGPU types (NVIDIA vGPU 17 and later) the ``gpu`` '
                     'driver may set on an idle VF at bind, as '
                     '``<product_id>:<type name>`` items, for example '
                     '``2331:NVIDIA H100-20C``. The VFs of such a card bound '
                     'to ``nvidia`` without a type (``nvidia/'
                     'current_vgpu_type`` 0) are offered through one VGPU '
                     'provider of the card per type it lists, with the '
                     'type\'s trait, whose total is what one GPU hosts of '
                     'the type (its framebuffer over the type\'s, at most '
                     'one per VF; ``mdev_max_instances`` overrides it) and '
                     'stays as the card fills. A card runs one type at a '
                     'time: an empty card offers every type named here, '
                     'and once a VF holds one, only that type is offered. '
                     'Each VF has an MDEV attach handle in the provider '
                     'marked ``vgpu_framework=vendor-vfio``, '
                     '``managed=no``: cyborg-conductor asks the sidecar '
                     '(``create_vgpu_mdev``) to write the type when it binds '
                     'an ARQ to the VF, refused cleanly when the card can no '
                     'longer host it or a server or another type holds the '
                     'VF, and Nova passes the VF through as a PCI function '
                     'with ``managed=\'no\'``. At unbind the sidecar writes '
                     '0 back, unless a domain or another ARQ still holds '
                     'the VF; after a host reboot it writes the type back '
                     'while the ARQ holds the VF. VFs whose type an '
                     'operator set keep a PCI handle, their own provider '
                     'and their type. Empty (the default): only those are '
                     'offered.'),
]

FPGA_OPTS = [
    cfg.StrOpt('programmer',
               default='dfl',
               choices=[('dfl',
                         'An Intel DFL card (PAC A10, D5005, N3000, '
                         'N6000): the ``DFL_FPGA_FME_PORT_PR`` ioctl on '
                         '``<dfl_dev_dir>/dfl-fme.N`` with a raw partial '
                         'bitstream for the port of the deployable.'),
                        ('command',
                         'A vendor command, ``program_command``.'),
                        ('fpga_manager',
                         'Removed: the sidecar refuses to start with it. '
                         'It wrote the FPGA manager\'s ``firmware`` file, '
                         'which only Xilinx\'s downstream kernel has; use '
                         '``dfl`` or ``command``.')],
               help='How a bitstream is written to an FPGA. Runs through '
                    'oslo.privsep.'),
    cfg.StrOpt('dfl_dev_dir',
               default='/dev',
               help='Where the DFL character devices (``dfl-fme.N``) are, '
                    'for ``programmer = dfl``.'),
    cfg.DictOpt('driver_programmers',
                default={},
                help='The programmer of each FPGA driver, for a host with '
                     'cards of several vendors: ``<driver>:<programmer>`` '
                     'pairs, the driver being the deployable\'s '
                     '``driver_name`` (``intel``, ``xilinx``, ``inspur`` or '
                     'the PCI vendor id), the programmer one of '
                     '``programmer``\'s choices; for example '
                     '``intel:dfl,xilinx:command``. A driver not '
                     'named here uses ``programmer``.'),
    cfg.StrOpt('program_command',
               help='Vendor programming command for ``programmer = '
                    'command``. ``{address}`` and ``{bitstream}`` are '
                    'replaced by the PCI address and the bitstream file, '
                    '``{segment}``, ``{bus}``, ``{device}`` and '
                    '``{function}`` by the address\'s parts in hex (OPAE: '
                    '``fpgaconf --segment 0x{segment} -B 0x{bus} -D '
                    '0x{device} {bitstream}``); the command is split with '
                    'shlex and never run through a shell.'),
    cfg.StrOpt('firmware_path',
               default='/lib/firmware',
               deprecated_for_removal=True,
               deprecated_reason='Only the removed ``fpga_manager`` '
                                 'programmer read it.',
               help='Unused: the directory the removed ``fpga_manager`` '
                    'programmer installed bitstreams in.'),
    cfg.IntOpt('max_bitstream_size',
               default=1024, min=1,
               help='Largest bitstream (MiB) the sidecar downloads.'),
]

HEALTH_OPTS = [
    cfg.IntOpt('unknown_after',
               default=600, min=1,
               help='Seconds without a good reading of a device\'s health '
                    '(its sysfs health files unreadable, or its check '
                    'failing) after which the device is Unknown: held out '
                    'of scheduling like an unhealthy one, with the trait '
                    '``CUSTOM_HEALTH_UNKNOWN`` and a reason giving the age '
                    'of the last good reading. Until then it keeps its '
                    'last verdict.'),
    cfg.ListOpt('link_speed_exempt_classes',
                default=['03'],
                help='PCI class prefixes (hex, as in the ``class`` file '
                     'without ``0x``) of devices whose PCIe link speed '
                     'below its maximum is no fault: display controllers '
                     '(``03``) lower their link speed when idle to save '
                     'power. A link narrower than it can be, or down, is a '
                     'fault for every device.'),
    cfg.ListOpt('nvml_fault_xids',
                item_type=cfg.types.Integer(min=1),
                default=[],
                help='Where the host has NVML (the ``nvidia`` driver holds '
                     'the GPU, and the optional ``nvidia-ml-py`` is '
                     'installed), the NVIDIA XIDs that make a GPU '
                     'unhealthy. Empty (the default): every critical XID '
                     'but the application errors 13, 31, 43, 45, 68 and '
                     '109, as NVIDIA\'s Kubernetes device plugin treats '
                     'them (internal/rm/health.go). A list: only those '
                     'XIDs; the others are logged. A double-bit ECC event, '
                     'a rise of the volatile uncorrected ECC count, a '
                     'recovery action other than none, a row remapping '
                     'pending or failed and a lost GPU are faults too. XID '
                     'and ECC faults are kept in ``nvml.json`` under '
                     '``[sidecar] state_path`` until the host reboots or '
                     'an operator clears them after a GPU reset '
                     '(``nova-cyborg-sidecar-manage device clear-errors '
                     '<GPU>``).'),
]
