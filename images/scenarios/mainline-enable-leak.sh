# mainline-enable-leak (a finding in upstream's abstractions; run by name
# only): Linux 7.x's `pci::Device::enable_device_mem` (pci_enable_device_mem)
# and `set_master` have no counterpart in its Rust API, and its PCI driver
# core undoes neither when a binding ends. After upstream's rust_driver_pci
# (which calls both in probe) is unbound, a device nobody drives must be
# disabled again: sysfs `enable` (the kernel's enable count) 0, Bus Master
# Enable (COMMAND bit 2) off; each binding must not add to the count.
# disabled: the kernel's enable count of $dev is 0 (printed either way).
disabled() {
    count=$(cat "$dev/enable")
    echo "enable count $count"
    [ "$count" = 0 ]
}
# master_off: COMMAND's Bus Master Enable bit is clear.
master_off() {
    command=$(od -An -tu1 -j4 -N1 "$dev/config")
    echo "COMMAND low byte $command"
    [ $(( command & 4 )) = 0 ]
}
check device_present find_testdev
check insmod_rust_driver_pci insmod /lib/modules/rust_driver_pci.ko
check bound bound_to rust_driver_pci
check unbind unbind_dev rust_driver_pci
check disabled_after_unbind disabled
check bus_master_off_after_unbind master_off
check bind_again bind_dev rust_driver_pci
check unbind_again unbind_dev rust_driver_pci
check disabled_after_second_unbind disabled
check rmmod_rust_driver_pci rmmod rust_driver_pci
