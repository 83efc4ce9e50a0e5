"""Parsers of foreign formats into typed values: what fio, the guest's kernel, QEMU, QMP and ESXi print.

One module per format: fio's JSON (fio_json), ``/proc/diskstats`` (proc_diskstats), ``/proc/stat``
(proc_stat), ``/proc/interrupts`` and the kernel's CPU lists (proc_interrupts), QMP's and libvirt's block
counters (blockstats), libvirt's vCPU statistics (hostcpu), QEMU's trace log (qemutrace), vscsiStats's
CSV (vscsistats_csv) and the histograms both traces become (histogram), the guest facts tool's sections
(guestfacts). Each is pure and tested on recorded output; a parser imports nothing of the project but
``model.errors`` and the other parsers.
"""
