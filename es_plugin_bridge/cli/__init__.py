"""The ``esrerank`` command line."""
