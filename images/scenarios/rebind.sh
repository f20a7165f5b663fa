# rebind: unbind, then bind the same device again.
ktap_plan 6
check device_present find_dev
check insmod_pci_rig insmod /lib/modules/pci_rig.ko
check bound bound_to pci_rig
check unbind put /sys/bus/pci/drivers/pci_rig/unbind "$bdf"
check unbound unbound
check bind_again put /sys/bus/pci/drivers/pci_rig/bind "$bdf"
