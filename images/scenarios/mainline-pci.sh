# mainline-pci: upstream's own Rust PCI sample (rust_driver_pci, Linux 7.x
# and its abstractions, no code of ours) on QEMU's pci-testdev: probe,
# unbind, bind again, rmmod.
find_testdev() {
    dev=
    for d in /sys/bus/pci/devices/*; do
        [ "$(cat "$d/vendor")" = 0x1b36 ] && [ "$(cat "$d/device")" = 0x0005 ] && dev=$d
    done
    bdf=${dev##*/}
    [ -n "$dev" ]
}
check device_present find_testdev
check insmod_sample insmod /lib/modules/rust_driver_pci.ko
check bound bound_to rust_driver_pci
check unbind unbind_dev rust_driver_pci
check unbound unbound
check bind_again bind_dev rust_driver_pci
check bound_again bound_to rust_driver_pci
check rmmod_sample rmmod rust_driver_pci
check unbound_at_last unbound
settle
