"""Whole pytest sessions of the vioconform plugin, each in a subprocess of its own, on small rule tests
that need no guest: exit codes, the verdict table, the JUnit file, the store and the redaction as a run
ends them. Each session imports pytest, SQLAlchemy, paramiko and the plugin
afresh (most of a second of CPU), so these modules run in tox -e test's second lane, beside the guest tests, not in the fast lane;
they need no root and no libvirt (``python -m pytest tests/runs`` runs them anywhere)."""
