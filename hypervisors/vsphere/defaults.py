"""The vSphere backend's defaults, read by the options without pyVmomi (hypervisors/defaults.py)."""

from __future__ import annotations

from hypervisors.defaults import BackendDefaults

#: Steady-state window per fio run: vCenter's realtime counters are 20 s samples, and a window must
#: span at least two whole ones.
WINDOW_S = 60.0

DEFAULTS = BackendDefaults(
    name="vsphere", title="vSphere", controllers=("pvscsi", "lsilogic-sas"), window_s=WINDOW_S,
    window_note=", whose counters come in 20 s samples", host_pool=False, names_disk=False, where="vCenter {hosts}",
    boots_images=False, version_property="vcenter.version", other_image="the vSphere template of --vcenter",
)
