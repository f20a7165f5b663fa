# sweep: one device fault per point of pcirig.points (KIND:N strikes at
# probe's N-th device access, the interrupt thread's included; KIND:wN at
# the N-th write after probe, remove()'s RESET for w1). Per point: the
# faulted binding (insmod, and rmmod), which must end cleanly whatever probe
# made of the fault; then the fault cleared and a clean binding, which must
# bind. The host judges each point by the driver's lines and the device's
# log.
# plan: 4 per point
check device_present find_dev
# arm KIND AT [writes]: arms the device's fault and waits until it is.
arm() {
    device_sync "{\"cmd\":\"arm_fault\",\"kind\":\"$1\",\"at\":$2,\"writes\":${3:-false}}"
}
# point_check POINT NAME COMMAND...: a check named after its point.
point_check() {
    point=$1; name=$2; shift 2
    check "point_${point%%:*}_${point#*:}_$name" "$@"
}
clean_binding() {
    insmod /lib/modules/pci_rig.ko && bound_to pci_rig && rmmod pci_rig
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
    point_check "$point" ended rmmod pci_rig
    point_check "$point" unbound unbound
    point_check "$point" region_released sh -c '! grep -q pci_rig /proc/iomem'
    device_sync '{"cmd":"clear_fault"}'
    point_check "$point" clean_binding clean_binding
done
# The last binding ended: stay up a while, so that a late access of any
# binding would be in the device's log.
settle
