# mmio: as probe; the host holds every access the driver reports against the device log.
check device_present find_dev
check insmod_pci_rig insmod /lib/modules/pci_rig.ko
check bound bound_to pci_rig
