"""``esrerank demo``'s steps, below the CLI: ``steps`` (the default run and its plan), ``common``
(the context, the shared tables and the data split), ``papers`` (``--papers``: the BOW-CNN's
reproduction), ``plots``."""
