"""The model types, one module per paper or network: each declares its types' hyper-parameter classes,
recipes and ``ModelType`` entries, and registers them with ``models.registry.register_types``.

Torch-free, as the registry: encoders are named by ``"module:Class"``. The registry imports these
modules in name order on its first lookup, so the number in a module's name is its types' place in
``ALL_TYPES`` (``--model-type``'s choices); the gaps (10, 20, …) leave room between.
"""

# First: the registry lists this package's modules while it loads, so that whichever type module is
# imported first, every type is registered in module order before any of them is looked up.
from es_plugin_bridge.models import registry  # noqa: F401
