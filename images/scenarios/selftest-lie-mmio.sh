# A guest that lies about MMIO: the driver binds, then user space writes a
# line in the driver's own format into the kernel log, reporting a write
# the device never saw. The harness must not find it in the device log.
check device_present find_dev
check insmod_pci_rig insmod /lib/modules/pci_rig.ko
check bound bound_to pci_rig
echo "pci_rig $bdf: # mmio w bar0 0x8 4 0xdeadbeef" > /dev/kmsg
