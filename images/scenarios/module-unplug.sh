# module-unplug: a foreign module (`--module`) bound to its device behind the
# root port rp0; then the host removes the device (QMP device_del, pciehp) and
# the kernel ends the binding as it goes; then the module is unloaded. The
# binding's window closes once the device is gone. module-surprise runs it with
# SURPRISE set: the device stops answering first.
check device_present find_module_dev
check loaded_and_bound load_module
if [ -n "$SURPRISE" ]; then
    sleep 1 # let the driver run
    device '{"cmd":"set_knobs","all_ones":true}'
fi
host unplug
check removed wait_for 300 gone
mark ended
check unplug_settled unplug_settled
check irqs_freed irqs_freed "$driver"
check rmmod rmmod "$module"
settle
