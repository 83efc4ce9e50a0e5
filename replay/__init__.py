"""The replay of a reproducer bundle (docs/reproducer.md): one rule on one configuration, with plain
QEMU and Python's standard library alone.

It travels inside the bundle as a zipapp (:mod:`replay.bundled`) with the project's pure ``model``
package, so it imports nothing but the standard library and ``model`` (tests/unit/test_layering.py).
``python3 replay [--qemu PATH] [--repeats N] [--out DIR]`` exits 0 (the rule passes), 1 (it fails) or
125 (it cannot be tested), the ``git bisect run`` convention.
"""
