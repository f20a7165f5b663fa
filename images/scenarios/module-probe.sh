# module-probe: a driver pci-rig did not write (`--module DIR`, its name in
# pcirig.module=) on the device its id table names (ours, or QEMU's
# pci-testdev): loaded, bound, unbound, bound again and unloaded. The host
# marks each binding's start and end; the judge holds the device's log and the
# MMIO oracle to those windows, and the config log to what an ended binding
# must leave (bus mastering and MSI off).
check device_present find_module_dev
check loaded_and_bound load_module
check unbind unbind_dev "$driver"
check unbound unbound
mark ended
say_command
check irqs_freed irqs_freed "$driver"
mark begin
check bind_again bind_dev "$driver"
check bound_again bound_to "$driver"
check rmmod rmmod "$module"
check unbound_at_last unbound
mark ended
say_command
check irqs_freed_at_last irqs_freed "$driver"
settle
