# sweep: one device fault per point of pcirig.points (KIND:N strikes at
# probe's N-th device access, the interrupt thread's included; KIND:wN at
# the N-th write after probe, remove()'s RESET for w1). Per point: the
# faulted binding (insmod, and rmmod), which must end cleanly whatever probe
# made of the fault; then the device back (the fault cleared; after an
# unplug or a death, a fresh device plugged in) and a clean binding, which
# must bind.
# The host judges each point by the driver's lines and the device's log.
# plan: 5 per point
check device_present find_dev
# ended KIND AT: the faulted binding ends by rmmod; for an unplug, pciehp
# or acpiphp removes the device too (the host sends device_del when the
# fault strikes: during probe, so the removal comes first; at remove()'s
# RESET, during the rmmod).
ended() {
    case $1:$2 in
    unplug:w*) rmmod pci_rig && wait_for 300 gone ;;
    unplug:*) wait_for 300 gone && rmmod pci_rig ;;
    *) rmmod pci_rig ;;
    esac
}
# back KIND: the device as it was before the point: the fault cleared, or a
# fresh device (the host's replug, once QEMU finished the unplug) after an
# unplug, or after the server died (this unplugs its device first).
back() {
    case $1 in
    unplug) host replug && wait_for 300 find_dev ;;
    die) host unplug && wait_for 300 gone && host replug && wait_for 300 find_dev ;;
    *) device_sync '{"cmd":"clear_fault"}' ;;
    esac
}
# After a replug find_dev sees the device (device_add) before the PCI core lets
# drivers match it (pci_bus_add_device): insmod may come first, and then the
# hotplug thread binds it a moment later. rmmod waits for a probe under way.
clean_binding() {
    insmod /lib/modules/pci_rig.ko && wait_for 50 bound_to pci_rig && rmmod pci_rig
}
for point in $(sweep_points); do
    kind=${point%%:*}
    at=${point#*:}
    echo "pcirig: point $point" > /dev/kmsg
    case $at in
    w*)
        insmod /lib/modules/pci_rig.ko
        bound_to pci_rig && arm "$kind" "${at#w}" true
        ;;
    *)
        arm "$kind" "$at"
        insmod /lib/modules/pci_rig.ko
        ;;
    esac
    point_check "$point" ended ended "$kind" "$at"
    point_check "$point" unbound unbound
    point_check "$point" region_released sh -c '! grep -q pci_rig /proc/iomem'
    point_check "$point" back back "$kind"
    point_check "$point" clean_binding clean_binding
done
# The last binding ended: stay up a while, so that a late access of any
# binding would be in the device's log.
settle
