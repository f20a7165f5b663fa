# platform: pcirig_platform (guest-kernel/platform) binds the device-tree
# node the host made compatible with "pci-rig,platform-demo" (QEMU's own
# tree, edited: harness/rig/src/guest/dt.rs), maps its MMIO window and reads it;
# unbind and bind again through sysfs, then rmmod. The host judges the
# driver's `event` lines; here the guest checks what sysfs and /proc/iomem
# say of the binding.
pdrv=/sys/bus/platform/drivers/pcirig_platform
# find_node: sets $pnode to the platform device of the demo node.
find_node() {
    pnode=
    for d in /sys/bus/platform/devices/*; do
        grep -qs "pci-rig,platform-demo" "$d/of_node/compatible" && pnode=${d##*/}
    done
    [ -n "$pnode" ]
}
pbound() { [ -e "$pdrv/$pnode" ]; }
punbound() { [ ! -e "/sys/bus/platform/devices/$pnode/driver" ]; }
# region_taken: the region is in /proc/iomem; its line and the node's
# device name (its unit address: the node's reg) go to the console for the
# host to compare with the address the driver says it mapped.
region_taken() {
    line=$(grep pcirig_platform /proc/iomem) || return 1
    echo "pcirig: platform node $pnode iomem $line" > /dev/console
}
region_free() { ! grep -q pcirig_platform /proc/iomem; }
check node_present find_node
check insmod_pcirig_platform insmod /lib/modules/pcirig_platform.ko
check bound pbound
check region_requested region_taken
check unbind put $pdrv/unbind "$pnode"
check unbound punbound
check bind_again put $pdrv/bind "$pnode"
check bound_again pbound
check rmmod_pcirig_platform rmmod pcirig_platform
check unbound_after_rmmod punbound
check region_released region_free
