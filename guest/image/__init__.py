"""The embedded guest image: a Debian kernel and a busybox initramfs, built and cached."""
