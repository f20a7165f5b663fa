# probe: the driver loads and binds to our device; its self-test runs in probe.
check device_present find_dev
check insmod_pci_rig insmod /lib/modules/pci_rig.ko
check bound bound_to pci_rig
check interrupts_listed interrupts
