"""Tests of the project's structure too slow for the fast lane (a copy of the tree, pytest runs inside it);
they run in tox -e test's second lane, beside the guest tests, and need no libvirt."""
