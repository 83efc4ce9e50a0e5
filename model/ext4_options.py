"""ext4 as the rules make it on a disk and take it off again (guest/tools/ext4.py runs it over SSH, the
replay in its own guest script): the options and figures both use.

Made with e2fsprogs' ``mkfs.ext4`` (4 KiB blocks) so that its only writes are its own metadata:
``lazy_itable_init`` and ``lazy_journal_init`` (the inode tables and the journal are not zeroed: 0.1 s
for 1 GiB under TCG), and mounted with ``noinit_itable`` so that the kernel does not zero the inode
tables in the background either (its ext4lazyinit thread would send write-zeroes while the rules
count); ``nodiscard`` unless asked to discard the region first (mke2fs's default).
"""

from __future__ import annotations

#: The filesystem's block: 4 KiB, ext4's default above 512 MiB and every host file system's.
BLOCK_BYTES = 4096
MKFS_OPTIONS = "nodiscard,lazy_itable_init=1,lazy_journal_init=1"
MOUNT_OPTIONS = "noatime,noinit_itable"
#: What taking it off zeroes at the disk's start: the primary superblock (at 1 KiB) and group
#: descriptors, so that nothing finds a filesystem there afterwards.
WIPE_BYTES = 1 << 20
#: statfs(2) of a mountpoint (busybox's stat and coreutils' alike): block size, total, free, available
#: (model/parse/filesystem.py's parse_statfs reads it).
STATFS = "stat -f -c '%S %b %f %a'"
