"""The vSphere backend (pyVmomi): provisioning, realtime perf counters and vscsiStats histograms.

Only this package imports pyVmomi; ``hypervisors.get_backend_class("vsphere")`` imports it on first use.
"""
