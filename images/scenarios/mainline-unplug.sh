# mainline-unplug: upstream's rust_driver_pci (Linux 7.x) bound to QEMU's
# pci-testdev behind the root port rp0; then the host removes the device
# (QMP device_del) and the kernel unbinds the sample as it goes.
check device_present find_testdev
check insmod_rust_driver_pci insmod /lib/modules/rust_driver_pci.ko
check bound bound_to rust_driver_pci
host unplug
check removed wait_for 300 gone
check unplug_settled unplug_settled
check rmmod_rust_driver_pci rmmod rust_driver_pci
settle
