# module-sweep: the removal-point sweep for a foreign module (`--module`) on
# our device: per point of pcirig.points (KIND:N strikes at the module's N-th
# device access from its load: its probe's, then its later ones'), a binding
# that meets the fault and is unloaded, which must end cleanly whatever probe
# made of it; then the fault cleared and a clean binding, which must bind.
# Each binding's window is marked: the judge holds every access and DMA to
# them and the config log to their ends; the kernel's lines to no splat.
# plan: 4 per point
check device_present find_module_dev
module=$(param module none)
clean_binding() {
    mark begin && insmod "/lib/modules/foreign/$module.ko" &&
        wait_for 50 driver_bound && rmmod "$module" && mark ended
}
for point in $(sweep_points); do
    echo "pcirig: point $point" > /dev/kmsg
    arm "${point%%:*}" "${point#*:}"
    mark begin
    insmod "/lib/modules/foreign/$module.ko"
    point_check "$point" unloaded rmmod "$module"
    point_check "$point" unbound unbound
    mark ended
    point_check "$point" back device_sync '{"cmd":"clear_fault"}'
    point_check "$point" clean_binding clean_binding
done
settle
