# Nova decides between eventlet and native threads before anything else is
# imported (tox sets OS_NOVA_DISABLE_EVENTLET_PATCHING=1: native threads).
from nova import monkey_patch; monkey_patch.patch()  # noqa: E702

from nova import objects  # noqa: E402

objects.register_all()
