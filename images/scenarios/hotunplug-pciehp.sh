# hotunplug-pciehp: the host removes the device (QMP device_del; native PCIe
# hotplug: pciehp sees the attention button and powers the slot off) while
# the driver's worker is busy with it; after a settle period plugs in a
# fresh device, which the still-loaded driver probes.
check device_present find_dev
check insmod_pci_rig insmod /lib/modules/pci_rig.ko
check bound bound_to pci_rig
check worker_reading wait_for 100 logged 1 "event worker_reading"
host unplug
check removed wait_for 300 gone
settle
host replug
check present_again wait_for 300 find_dev
check bound_again wait_for 100 bound_to pci_rig
