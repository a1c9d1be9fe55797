"""The model types, one module per paper or network: each declares its types' hyper-parameter classes,
recipes and ``ModelType`` entries, and registers them with ``models.registry.register_types``.

Torch-free, as the registry: encoders are named by ``"module:Class"``. The registry imports these
modules on its first lookup; ``register_types``'s ``order`` places a module's types in ``ALL_TYPES``
(``--model-type``'s choices: 10 dos Santos et al., 20 Lei et al., 30 paper 004, 40 the transformer,
50 the cross-encoder; the gaps leave room between).
"""

# First: the registry discovers this package's modules while it loads, so whichever type module is
# imported first, the registry is complete (that module included) before that module's own body runs.
from es_plugin_bridge.models import registry  # noqa: F401
