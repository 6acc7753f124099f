"""Helpers shared by the test suite and by CI's service manager.

Fixtures live in ``conftest.py`` files; everything they and the tests reuse
(service addresses and accounts, probes, private broker instances) lives here,
so no test imports a conftest module.
"""
