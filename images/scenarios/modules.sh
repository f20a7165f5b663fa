# modules: insmod/rmmod 50 times with the device present.
check device_present find_dev
cycle() {
    n=0
    while [ $n -lt 50 ]; do
        insmod /lib/modules/pci_rig.ko || return 1
        bound_to pci_rig || { echo "cycle $n: not bound"; return 1; }
        rmmod pci_rig || return 1
        n=$((n + 1))
    done
}
check fifty_cycles cycle
check unbound unbound
check no_region_left sh -c '! grep -q pci_rig /proc/iomem'
# The last binding ended: stay up a while, so that a late access of it (a
# work item leaked past rmmod) would be in the device's log.
settle
