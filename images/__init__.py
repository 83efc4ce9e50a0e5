"""What the host builds for a guest, and caches: the embedded guest image (a Debian kernel and a busybox
initramfs), the static fio, a user's image checked and overlaid, the cloud-init seed (cache.py: the
cache every builder shares). Nothing here runs in a guest; the programs that do are guest/tools/."""
