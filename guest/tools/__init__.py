"""One typed class per guest program or file: fio, diskstats, sysfs, interrupts, partitioning."""
