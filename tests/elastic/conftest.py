"""The ``recorder`` fixture (``es_recorder``) for every test of this folder."""

from es_recorder import recorder  # noqa: F401
